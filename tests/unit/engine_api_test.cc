// The public Engine (include/dsinfer/engine.h): many threads submitting at once get exactly the
// outputs of a sequential batch; streaming, abort from another thread, per-request errors.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dsinfer/engine.h"
#include "engine_test_util.h"

namespace dsinfer {
namespace {

std::vector<GenerateRequest> SeededRequests(int n) {
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerateRequest r;
    r.prompt_ids = testing::RandomIds(3 + i % 17, 500 + i);
    r.params.max_tokens = 3 + i % 5;
    r.params.seed = i;
    r.params.top_k = 50;
    r.params.ignore_eos = true;
    r.priority = i % 3;
    reqs.push_back(r);
  }
  return reqs;
}

TEST(EngineApiTest, ManyConcurrentSubmittersGetTheSequentialOutputs) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const auto reqs = SeededRequests(32);
  const auto expected = (*engine)->Generate(reqs);
  for (const auto& r : expected) ASSERT_TRUE(r.status.ok()) << r.status.ToString();

  std::vector<std::vector<int32_t>> got(reqs.size());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < reqs.size(); i += 8) {
        auto stream = (*engine)->Submit(reqs[i]);
        ASSERT_TRUE(stream.ok());
        StreamEvent ev;
        while ((*stream)->Next(&ev)) got[i].insert(got[i].end(), ev.ids.begin(), ev.ids.end());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i], expected[i].completions[0].ids) << i;
  const auto stats = (*engine)->Stats();
  EXPECT_EQ(stats.requests_finished, 64);
  EXPECT_EQ(stats.state_bytes_used, 0);
}

// max_batch_tokens 0 takes the device's default (the CPU's 256); a given value is kept; a
// negative one is refused.
TEST(EngineApiTest, BatchTokensDefaultPerDevice) {
  EngineOptions o = testing::SmallEngineOptions();
  o.max_batch_tokens = 0;
  auto engine = Engine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->device(), "cpu");
  EXPECT_EQ((*engine)->max_batch_tokens(), EngineOptions::kCpuBatchTokens);
  const auto given = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(given.ok());
  EXPECT_EQ((*given)->max_batch_tokens(), 64);
  o.max_batch_tokens = -1;
  const auto bad = Engine::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("max_batch_tokens"), std::string::npos);
}

// --kv-cache-dtype fp8 (the FP8 K=V / FP4 index-key cache, packed in the engine's state pages):
// the same completions under other step sizes (other chunkings and batches); a bad name and
// DeepSeek-V4.1 with float32 are refused.
TEST(EngineApiTest, Fp8KvCacheIsScheduleInvariantAndBadDtypesAreRefused) {
  const auto reqs = SeededRequests(12);
  std::vector<std::vector<int32_t>> first;
  for (int64_t step_tokens : {64, 7}) {
    EngineOptions o = testing::SmallEngineOptions();
    o.kv_cache_dtype = "fp8";
    o.max_batch_tokens = step_tokens;
    auto engine = Engine::Create(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    const auto results = (*engine)->Generate(reqs);
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].status.ok()) << results[i].status.ToString();
      if (first.size() < results.size()) {
        first.push_back(results[i].completions[0].ids);
        EXPECT_FALSE(first.back().empty());
      } else {
        EXPECT_EQ(results[i].completions[0].ids, first[i]) << "request " << i;
      }
    }
  }
  EngineOptions bad = testing::SmallEngineOptions();
  bad.kv_cache_dtype = "int4";
  const auto refused = Engine::Create(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("kv cache dtype"), std::string::npos);
  EngineOptions v41 = testing::SmallEngineOptions(testing::Family::kV41);
  v41.kv_cache_dtype = "float32";
  const auto v41_refused = Engine::Create(v41);
  ASSERT_FALSE(v41_refused.ok());
  EXPECT_NE(v41_refused.status().ToString().find("DeepSeek-V4.1"), std::string::npos);
}

TEST(EngineApiTest, AbortFromAnotherThreadEndsTheStream) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  GenerateRequest r;
  r.prompt_ids = {1, 2, 3};
  r.params.max_tokens = 1000;
  r.params.ignore_eos = true;
  r.params.n = 2;
  auto stream = (*engine)->Submit(r);
  ASSERT_TRUE(stream.ok());
  StreamEvent ev;
  ASSERT_TRUE((*stream)->Next(&ev));  // it is running
  std::thread aborter([&] { (*engine)->Abort((*stream)->id()); });
  int finals = 0;
  while ((*stream)->Next(&ev)) finals += ev.finish == FinishReason::kAbort;
  aborter.join();
  EXPECT_EQ(finals, 2);
}

// The event-loop interface: SetNotify fires on the engine thread for every event (and at once for
// events already queued), TryNext never blocks, and the events are those Next() would give.
TEST(EngineApiTest, NotifyAndTryNextGiveTheSameEventsWithoutBlocking) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  auto reqs = SeededRequests(4);
  reqs[2].params.n = 3;
  const auto expected = (*engine)->Generate(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto stream = (*engine)->Submit(reqs[i]);
    ASSERT_TRUE(stream.ok());
    std::mutex mu;
    std::condition_variable cv;
    int notified = 0;
    if (i % 2 == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // events queued first
    (*stream)->SetNotify([&] {
      std::lock_guard<std::mutex> lock(mu);
      ++notified;
      cv.notify_all();
    });
    std::vector<std::vector<int32_t>> got(static_cast<size_t>(reqs[i].params.n));
    int finals = 0, taken = 0;
    while (finals < reqs[i].params.n) {
      StreamEvent ev;
      if (!(*stream)->TryNext(&ev)) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return notified > taken; });
        continue;
      }
      ++taken;
      got[ev.index].insert(got[ev.index].end(), ev.ids.begin(), ev.ids.end());
      finals += ev.finish != FinishReason::kNone;
    }
    StreamEvent ev;
    EXPECT_FALSE((*stream)->TryNext(&ev));
    EXPECT_FALSE((*stream)->Next(&ev)) << "the stream has ended";
    (*stream)->SetNotify(nullptr);
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_GE(notified, 1);
    for (int k = 0; k < reqs[i].params.n; ++k)
      EXPECT_EQ(got[k], expected[i].completions[k].ids) << i;
  }
}

TEST(EngineApiTest, BadRequestsFailAloneInABatch) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  auto reqs = SeededRequests(3);
  reqs[1].params.top_p = 2;
  const auto results = (*engine)->Generate(reqs);
  EXPECT_TRUE(results[0].status.ok());
  EXPECT_EQ(results[1].status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[2].status.ok());
  EXPECT_EQ(results[2].completions[0].ids.size(), static_cast<size_t>(reqs[2].params.max_tokens));
  EXPECT_EQ(results[2].completions[0].finish, FinishReason::kLength);
  EXPECT_GT(results[2].completions[0].e2e_s, 0);
}

// Text that is not valid UTF-8 is refused with its byte offset (never silently repaired).
TEST(EngineApiTest, InvalidUtf8IsRefusedWithItsOffset) {
  auto engine = Engine::Create(testing::SmallEngineOptions());
  ASSERT_TRUE(engine.ok());
  GenerateRequest r;
  r.prompt = std::string("abc\xff", 4);
  auto s = (*engine)->Submit(r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("offset 3"), std::string::npos) << s.status().message();
  GenerateRequest q = SeededRequests(1)[0];
  q.params.stop = {"ok", std::string("\xc3", 1)};
  s = (*engine)->Submit(q);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("stop string 1"), std::string::npos) << s.status().message();
}

TEST(EngineApiTest, DestroyingTheEngineEndsOpenStreams) {
  std::shared_ptr<RequestStream> stream;
  {
    auto engine = Engine::Create(testing::SmallEngineOptions());
    ASSERT_TRUE(engine.ok());
    GenerateRequest r;
    r.prompt_ids = {1, 2, 3};
    r.params.max_tokens = 100000;
    r.max_tokens_up_to_context = true;
    r.params.ignore_eos = true;
    stream = *(*engine)->Submit(r);
  }
  StreamEvent ev;
  FinishReason last = FinishReason::kNone;
  while (stream->Next(&ev)) last = ev.finish;
  EXPECT_EQ(last, FinishReason::kAbort);
}

}  // namespace
}  // namespace dsinfer
