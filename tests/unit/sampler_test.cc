// Sampler: Philox known answers, the shared draw arithmetic (backend/sample_row.h) against
// independent references, distributions checked statistically against exact probabilities
// computed here independently, greedy/penalty/bias/min_tokens rules, parameter validation.
#include "sampler/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "backend/sample_row.h"
#include "sampler/philox.h"
#include "test_util.h"

namespace dsinfer::sampler {
namespace {

TEST(PhiloxTest, KnownAnswers) {
  // Random123's known-answer vectors for Philox4x32-10.
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(PhiloxTest, UniformIsAFunctionOfItsKeyAndCounter) {
  EXPECT_EQ(UniformAt(7, 100, 0), UniformAt(7, 100, 0));
  EXPECT_NE(UniformAt(7, 100, 0), UniformAt(7, 101, 0));
  EXPECT_NE(UniformAt(7, 100, 0), UniformAt(7, 100, 1));
  EXPECT_NE(UniformAt(7, 100, 0), UniformAt(8, 100, 0));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = UniformAt(3, i, 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(SampleRowTest, ExpIsCloseToTheLibraryExpAndExactAtZero) {
  EXPECT_EQ(backend::SampleExp(0.0f), 1.0f);
  EXPECT_EQ(backend::SampleExp(-64.5f), 0.0f);
  EXPECT_EQ(backend::SampleExp(-INFINITY), 0.0f);
  EXPECT_EQ(backend::SampleExp(NAN), 0.0f);
  double worst = 0;
  for (int i = 0; i < 640000; ++i) {  // x in (-64, 0]
    const float x = -64.0f * static_cast<float>(i) / 640000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(backend::SampleExp(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  // Monotone (non-increasing) as x falls, so larger logits never get smaller weights.
  float prev = 1.0f;
  for (float x = 0.0f; x > -20.0f; x = std::nextafter(x, -30.0f) - 1e-4f) {
    const float w = backend::SampleExp(x);
    ASSERT_LE(w, prev) << x;
    prev = w;
  }
}

TEST(SampleRowTest, TargetIsTheExactProductShifted) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t u = rng() >> 11, total = rng() >> (1 + rng() % 40);
    __extension__ const unsigned __int128 want = static_cast<unsigned __int128>(u) * total >> 53;
    ASSERT_EQ(backend::SampleTarget(u, total), static_cast<uint64_t>(want)) << u << " " << total;
    ASSERT_LT(backend::SampleTarget(u, total), std::max<uint64_t>(total, 1));
  }
  EXPECT_EQ(backend::SampleTarget((uint64_t{1} << 53) - 1, uint64_t{1} << 62),
            (uint64_t{1} << 62) - (uint64_t{1} << 9));
}

TEST(SampleRowTest, KeysOrderByValueThenLowerId) {
  const float xs[] = {-INFINITY, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.0f, INFINITY};
  for (size_t a = 0; a < std::size(xs); ++a) {
    for (size_t b = 0; b < std::size(xs); ++b) {
      for (int32_t ia : {0, 7, 129279}) {
        for (int32_t ib : {0, 7, 129279}) {
          const bool more = xs[a] > xs[b] || (xs[a] == xs[b] && ia < ib);
          ASSERT_EQ(backend::SampleKey(xs[a], ia) > backend::SampleKey(xs[b], ib), more)
              << xs[a] << "/" << ia << " vs " << xs[b] << "/" << ib;
        }
      }
    }
  }
  // Fixed-point weights of a whole vocabulary sum below 2^62.
  EXPECT_LT(
      static_cast<double>(backend::SampleFixed(1.0f, backend::SampleFixedShift(129280))) * 129280,
      std::ldexp(1.0, 62));
}

// The exact distribution of SamplingParams over `logits`, written independently of the sampler.
std::vector<double> Exact(const std::vector<float>& logits, const SamplingParams& p) {
  const int V = static_cast<int>(logits.size());
  std::vector<double> x(V);
  for (int i = 0; i < V; ++i) x[i] = static_cast<double>(logits[i]) / p.temperature;
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  const int k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<double> prob(V, 0.0);
  double z = 0;
  for (int i = 0; i < k; ++i) z += std::exp(x[order[i]]);
  std::vector<int> kept;
  double cum = 0;
  for (int i = 0; i < k; ++i) {
    kept.push_back(order[i]);
    cum += std::exp(x[order[i]]) / z;
    if (cum >= p.top_p) break;
  }
  const double pmax = std::exp(x[kept[0]]);
  double zk = 0;
  std::vector<int> final_set;
  for (int id : kept) {
    if (std::exp(x[id]) >= p.min_p * pmax) {
      final_set.push_back(id);
      zk += std::exp(x[id]);
    }
  }
  for (int id : final_set) prob[id] = std::exp(x[id]) / zk;
  return prob;
}

struct Case {
  const char* name;
  float temperature;
  int top_k;
  float top_p;
  float min_p;
};

TEST(SamplerTest, DistributionsMatchExactProbabilities) {
  const int V = 40, N = 30000;
  const auto logits = testing::RandomVector(V, 11, 2.0f);
  const Case cases[] = {{"temperature", 0.7f, 0, 1.0f, 0.0f},
                        {"top_k", 1.0f, 6, 1.0f, 0.0f},
                        {"top_p", 1.0f, 0, 0.8f, 0.0f},
                        {"min_p", 1.0f, 0, 1.0f, 0.1f},
                        {"all", 1.3f, 12, 0.9f, 0.05f}};
  Sampler sampler;
  for (const auto& cs : cases) {
    SamplingParams p;
    p.temperature = cs.temperature;
    p.top_k = cs.top_k;
    p.top_p = cs.top_p;
    p.min_p = cs.min_p;
    const auto exact = Exact(logits, p);
    SampleInput in;
    in.params = &p;
    in.seed = 1234;
    const auto probs = sampler.Probabilities(logits.data(), V, in);
    for (int i = 0; i < V; ++i) EXPECT_NEAR(probs[i], exact[i], 1e-6) << cs.name << " id " << i;
    std::vector<int> counts(V, 0);
    for (int t = 0; t < N; ++t) {
      in.position = t;
      ++counts[sampler.Sample(logits.data(), V, in).id];
    }
    // Pearson chi-square over the support; tokens outside it must never appear.
    double chi2 = 0;
    int dof = -1;
    for (int i = 0; i < V; ++i) {
      if (exact[i] == 0) {
        EXPECT_EQ(counts[i], 0) << cs.name << ": id " << i << " is outside the support";
        continue;
      }
      const double e = exact[i] * N;
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
      ++dof;
    }
    // Mean dof, sd sqrt(2 dof): 6 sd is a false alarm rate far below 1e-6.
    EXPECT_LT(chi2, dof + 6 * std::sqrt(2.0 * std::max(dof, 1))) << cs.name << " dof " << dof;
  }
}

TEST(SamplerTest, LargeVocabularyTopPMatchesExact) {
  const int V = 5000;  // exercises the growing partial sort
  const auto logits = testing::RandomVector(V, 12, 1.0f);
  SamplingParams p;
  p.top_p = 0.95f;
  SampleInput in;
  in.params = &p;
  Sampler sampler;
  const auto probs = sampler.Probabilities(logits.data(), V, in);
  const auto exact = Exact(logits, p);
  for (int i = 0; i < V; ++i) ASSERT_NEAR(probs[i], exact[i], 1e-6) << i;
}

TEST(SamplerTest, SameSeedAndPositionGiveTheSameToken) {
  const auto logits = testing::RandomVector(100, 13, 1.0f);
  SamplingParams p;
  SampleInput in;
  in.params = &p;
  in.seed = 99;
  in.position = 17;
  Sampler a, b;
  const int32_t t = a.Sample(logits.data(), 100, in).id;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.Sample(logits.data(), 100, in).id, t);
  int differ = 0;
  for (int s = 0; s < 20; ++s) {
    in.sample_index = static_cast<uint32_t>(s);
    differ += a.Sample(logits.data(), 100, in).id != t;
  }
  EXPECT_GT(differ, 0) << "sample indexes draw different numbers";
}

TEST(SamplerTest, PendingOutputsCountAsHistory) {
  // A verify row's draw sees the drafts before it as outputs: the same edits as a history that
  // holds them (penalties, min_tokens), so the same probabilities and tokens.
  const auto logits = testing::RandomVector(100, 14, 2.0f);
  SamplingParams p;
  p.repetition_penalty = 1.3f;
  p.presence_penalty = 0.4f;
  p.frequency_penalty = 0.7f;
  p.min_tokens = 4;
  const std::vector<int32_t> prompt = {1, 2, 3}, pending = {7, 9, 7};
  TokenHistory base(prompt);
  base.AddOutput(9);
  TokenHistory full = base;
  for (int32_t id : pending) full.AddOutput(id);
  for (int count = 0; count <= 3; ++count) {
    TokenHistory expect = base;
    for (int i = 0; i < count; ++i) expect.AddOutput(pending[i]);
    SampleInput a, b;
    a.params = b.params = &p;
    a.seed = b.seed = 5;
    a.position = b.position = 30;
    a.eos_id = b.eos_id = 0;
    a.history = &base;
    a.pending = pending.data();
    a.num_pending = count;
    b.history = &expect;
    Sampler s;
    EXPECT_EQ(s.Probabilities(logits.data(), 100, a), s.Probabilities(logits.data(), 100, b))
        << count;
    EXPECT_EQ(s.Sample(logits.data(), 100, a).id, s.Sample(logits.data(), 100, b).id) << count;
  }
}

TEST(SamplerTest, AllowedMaskIsExactAndDeterministic) {
  const int64_t vocab = 200;
  const auto logits = testing::RandomVector(vocab, 21, 2.0f);
  std::vector<uint64_t> mask((vocab + 63) / 64, 0);
  const std::vector<int32_t> allowed = {3, 64, 65, 130, 199};
  for (int32_t id : allowed) mask[id >> 6] |= uint64_t{1} << (id & 63);
  for (float temperature : {0.0f, 1.0f}) {
    for (float top_p : {1.0f, 0.5f}) {
      SamplingParams p;
      p.temperature = temperature;
      p.top_p = top_p;
      p.top_k = top_p < 1.0f ? 50 : 0;
      SampleInput in;
      in.params = &p;
      in.allowed = mask.data();
      Sampler s;
      // The masked distribution: the model's, renormalized over the allowed ids.
      const auto probs = s.Probabilities(logits.data(), vocab, in);
      double mass = 0;
      for (int64_t id = 0; id < vocab; ++id) {
        if (std::find(allowed.begin(), allowed.end(), id) == allowed.end()) {
          EXPECT_EQ(probs[id], 0.0) << id;
        }
        mass += probs[id];
      }
      EXPECT_NEAR(mass, 1.0, 1e-9);
      for (int pos = 0; pos < 300; ++pos) {
        in.position = pos;
        in.seed = 5;
        const int32_t t = s.Sample(logits.data(), vocab, in).id;
        ASSERT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
        EXPECT_EQ(Sampler().Sample(logits.data(), vocab, in).id, t);
      }
    }
  }
}

TEST(SamplerTest, GreedyTiesGoToTheSmallestId) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0;
  SampleInput in;
  in.params = &p;
  Sampler s;
  EXPECT_EQ(s.Sample(logits.data(), 4, in).id, 1);
}

TEST(SamplerTest, PenaltiesBiasAndMinTokens) {
  std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.5f, 0.0f};
  TokenHistory h({2});  // prompt: id 2
  h.AddOutput(0);
  h.AddOutput(0);
  h.AddOutput(3);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.temperature = 1.0f;
  SampleInput in;
  in.params = &p;
  in.history = &h;
  Sampler s;
  auto probs = s.Probabilities(logits.data(), 5, in);
  // Expected logits: id0: 2/2 - 0.5 - 0.5 = 0; id1: 1; id2: -1*2 = -2; id3: 0.5/2 - 0.5 - 0.25 = -0.5; id4: 0.
  const double want[5] = {0.0, 1.0, -2.0, -0.5, 0.0};
  double z = 0;
  for (double w : want) z += std::exp(w);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(probs[i], std::exp(want[i]) / z, 1e-6) << i;

  SamplingParams bias;
  bias.temperature = 0;
  bias.logit_bias[4] = 100;
  in.params = &bias;
  in.history = nullptr;
  EXPECT_EQ(s.Sample(logits.data(), 5, in).id, 4);

  SamplingParams min_tokens;
  min_tokens.temperature = 0;
  min_tokens.min_tokens = 2;
  min_tokens.stop_token_ids = {1};
  TokenHistory one;
  one.AddOutput(3);
  in.params = &min_tokens;
  in.history = &one;
  in.eos_id = 0;
  EXPECT_EQ(s.Sample(logits.data(), 5, in).id, 3) << "EOS (0) and stop id 1 are masked";
  one.AddOutput(3);
  EXPECT_EQ(s.Sample(logits.data(), 5, in).id, 0) << "after min_tokens EOS is allowed";
}

TEST(SamplerTest, LogprobsAreThoseOfTheRawDistribution) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 2;
  SampleInput in;
  in.params = &p;
  Sampler s;
  auto t = s.Sample(logits.data(), 3, in);
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_EQ(t.id, 1);
  EXPECT_NEAR(t.logprob, 3.0 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_EQ(t.top[1].id, 2);
  EXPECT_NEAR(t.top[1].logprob, 2.0 - lse, 1e-6);
}

TEST(SamplingParamsTest, RejectsBadValues) {
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return p.Validate().code();
  };
  EXPECT_TRUE(SamplingParams().Validate().ok());
  EXPECT_EQ(bad([](SamplingParams& p) { p.temperature = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.temperature = NAN; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.top_p = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.top_p = 1.5f; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.min_p = -0.1f; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.top_k = -2; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.max_tokens = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.min_tokens = 20; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.n = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.repetition_penalty = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.presence_penalty = 3; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.top_logprobs = 21; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.logit_bias[3] = 200; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](SamplingParams& p) { p.stop = {""}; }), StatusCode::kInvalidArgument);
  SamplingParams p;
  p.logit_bias[500] = 1;
  EXPECT_EQ(p.ValidateForVocab(300).code(), StatusCode::kInvalidArgument);
  p.logit_bias.clear();
  p.stop_token_ids = {-1};
  EXPECT_EQ(p.ValidateForVocab(300).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsinfer::sampler
