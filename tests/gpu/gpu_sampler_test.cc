// The GPU sampler (executor/cuda_sampler + backend/cuda's sampling kernel) against the CPU sampler
// (sampler/sampler.cc): given identical logits, every draw picks the same token — greedy,
// temperature, top-k, top-p, min-p and their combinations, logit_bias, min_tokens masks,
// repetition / presence / frequency penalties, grammar masks — over vocabularies of odd sizes and
// V4's 129,280, on peaked, flat and heavily tied logits; logprobs agree to 1e-5 and the top
// logprobs' ids exactly. A draw's result does not depend on the other draws of its batch.
// Skipped without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "executor/cuda_sampler.h"
#include "sampler/sampler.h"
#include "sampler/token_history.h"

namespace dsinfer::executor {
namespace {

namespace gpu = backend::cuda;

#define SKIP_WITHOUT_GPU() \
  if (!gpu::DeviceAvailable()) GTEST_SKIP() << "no CUDA device"

// One draw's inputs, owned (SampleInput holds pointers).
struct Case {
  sampler::SamplingParams params;
  sampler::TokenHistory history;
  std::vector<uint64_t> mask;  // empty: unconstrained
  uint64_t seed = 0;
  uint32_t index = 0;
  int64_t position = 0;
};

std::vector<std::unique_ptr<Case>> RandomCases(int count, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  auto uni = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  std::vector<std::unique_ptr<Case>> cases;
  for (int i = 0; i < count; ++i) {
    auto c = std::make_unique<Case>();
    sampler::SamplingParams& p = c->params;
    const int kind = i % 8;
    p.temperature = kind == 0 ? 0.0f : uni(0.3f, 1.7f);
    if (kind == 2 || kind == 6) p.top_k = 1 + static_cast<int>(rng() % 60);
    if (kind == 3 || kind == 6 || kind == 7) p.top_p = uni(0.05f, 0.999f);
    if (kind == 4 || kind == 7) p.min_p = uni(0.001f, 0.5f);
    if (kind == 5 && rng() % 2)
      p.top_k = static_cast<int>(vocab + 5);  // top-k beyond the vocab: off
    std::vector<int32_t> prompt;
    for (int t = 0; t < 40; ++t) prompt.push_back(static_cast<int32_t>(rng() % vocab));
    c->history = sampler::TokenHistory(prompt);
    for (int t = 0; t < static_cast<int>(rng() % 30); ++t)
      c->history.AddOutput(static_cast<int32_t>(rng() % vocab));
    if (rng() % 3 == 0) p.repetition_penalty = uni(0.8f, 1.5f);
    if (rng() % 3 == 0) p.presence_penalty = uni(-1.0f, 1.5f);
    if (rng() % 3 == 0) p.frequency_penalty = uni(-0.5f, 1.0f);
    if (rng() % 3 == 0) {
      for (int b = 0; b < 5; ++b)
        p.logit_bias[static_cast<int32_t>(rng() % vocab)] = uni(-20.0f, 20.0f);
    }
    if (rng() % 4 == 0) {
      p.min_tokens = 100;  // EOS (0) and the stop ids masked
      p.stop_token_ids = {1, static_cast<int32_t>(rng() % vocab)};
    }
    if (rng() % 4 == 0) {  // a grammar mask allowing ~30% of the ids
      c->mask.assign(static_cast<size_t>((vocab + 63) / 64), 0);
      for (int64_t id = 0; id < vocab; ++id) {
        if (rng() % 10 < 3) c->mask[id / 64] |= uint64_t{1} << (id % 64);
      }
    }
    p.logprobs = rng() % 2;
    p.top_logprobs = rng() % 3 == 0 ? static_cast<int>(rng() % 21) : 0;
    c->seed = (uint64_t{rng()} << 32) | rng();
    c->index = rng() % 4;
    c->position = rng() % 100000;
    cases.push_back(std::move(c));
  }
  return cases;
}

RunDraw ToDraw(const Case& c, int chunk) {
  RunDraw d;
  d.chunk = chunk;
  d.input.params = &c.params;
  d.input.history = &c.history;
  d.input.seed = c.seed;
  d.input.sample_index = c.index;
  d.input.position = c.position;
  d.input.eos_id = 0;
  d.input.allowed = c.mask.empty() ? nullptr : c.mask.data();
  return d;
}

// Logits [rows, vocab] of a style: 0 normal(0, 2), 1 peaked normal(0, 8), 2 flat normal(0, 0.05),
// 3 heavily tied (normal rounded to halves).
std::vector<float> Logits(int64_t rows, int64_t vocab, int style, uint32_t seed) {
  std::mt19937 rng(seed);
  const float scale[] = {2.0f, 8.0f, 0.05f, 2.0f};
  std::normal_distribution<float> dist(0.0f, scale[style]);
  std::vector<float> v(static_cast<size_t>(rows * vocab));
  for (auto& x : v) x = style == 3 ? std::round(dist(rng) * 2.0f) / 2.0f : dist(rng);
  return v;
}

void CheckAgainstCpu(int64_t vocab, int style, int rows, uint32_t seed) {
  const auto logits = Logits(rows, vocab, style, seed);
  const auto cases = RandomCases(rows, vocab, seed + 1);
  gpu::DeviceBuffer dev(logits.size() * sizeof(float));
  gpu::CopyToDeviceSync(dev.get(), logits.data(), logits.size() * sizeof(float));
  gpu::Stream stream;
  CudaSampler cuda(vocab, 256);
  // Draw r reads row (r * 7) % rows: rows shared and permuted, as n > 1 siblings do.
  std::vector<RunDraw> draws;
  for (int r = 0; r < rows; ++r) draws.push_back(ToDraw(*cases[r], (r * 7) % rows));
  const auto got = cuda.Sample(dev.as<float>(), draws, stream.get());
  ASSERT_EQ(got.size(), draws.size());
  sampler::Sampler cpu;
  for (int r = 0; r < rows; ++r) {
    const std::string what = "V=" + std::to_string(vocab) + " style " + std::to_string(style) +
                             " draw " + std::to_string(r);
    const auto want = cpu.Sample(logits.data() + draws[r].chunk * vocab, vocab, draws[r].input);
    ASSERT_EQ(got[r].id, want.id) << what;
    if (cases[r]->params.logprobs || cases[r]->params.top_logprobs > 0) {
      EXPECT_NEAR(got[r].logprob, want.logprob, 1e-5) << what;
      ASSERT_EQ(got[r].top.size(), want.top.size()) << what;
      for (size_t k = 0; k < want.top.size(); ++k) {
        EXPECT_EQ(got[r].top[k].id, want.top[k].id) << what << " top " << k;
        EXPECT_NEAR(got[r].top[k].logprob, want.top[k].logprob, 1e-5) << what << " top " << k;
      }
    }
  }
  // Batch invariance: each draw alone gives the same token and logprobs, bit for bit.
  for (int r = 0; r < rows; r += 5) {
    const auto alone = cuda.Sample(dev.as<float>(), {draws[r]}, stream.get());
    ASSERT_EQ(alone[0].id, got[r].id);
    ASSERT_EQ(alone[0].logprob, got[r].logprob);
    ASSERT_EQ(alone[0].top.size(), got[r].top.size());
  }
}

TEST(GpuSamplerTest, PicksTheCpuSamplersTokens) {
  SKIP_WITHOUT_GPU();
  for (const int64_t vocab : {int64_t{1000}, int64_t{5003}, int64_t{129280}}) {
    for (int style = 0; style < 4; ++style) {
      CheckAgainstCpu(vocab, style, vocab > 10000 ? 48 : 96,
                      100 * style + static_cast<uint32_t>(vocab));
    }
  }
}

// A batch of plain greedy draws (no edits, mask or logprobs) takes the cluster argmax kernel: the
// same ids as the CPU sampler, rows shared and permuted, ties to the lower id.
TEST(GpuSamplerTest, PlainGreedyBatchesAgree) {
  SKIP_WITHOUT_GPU();
  for (const int64_t vocab : {int64_t{129280}, int64_t{4999}}) {
    const int rows = 40;
    auto logits = Logits(rows, vocab, 3, 9);  // tied values: the lower id must win
    gpu::DeviceBuffer dev(logits.size() * sizeof(float));
    gpu::CopyToDeviceSync(dev.get(), logits.data(), logits.size() * sizeof(float));
    gpu::Stream stream;
    CudaSampler cuda(vocab, 256);
    sampler::SamplingParams greedy;
    greedy.temperature = 0;
    std::vector<RunDraw> draws;
    for (int r = 0; r < rows; ++r) {
      RunDraw d;
      d.chunk = (r * 7) % rows;
      d.input.params = &greedy;
      draws.push_back(d);
    }
    const auto got = cuda.Sample(dev.as<float>(), draws, stream.get());
    sampler::Sampler cpu;
    for (int r = 0; r < rows; ++r) {
      ASSERT_EQ(got[r].id,
                cpu.Sample(logits.data() + draws[r].chunk * vocab, vocab, draws[r].input).id)
          << "V=" << vocab << " draw " << r;
    }
  }
}

// Many seeds on one row: the GPU's draws follow the same distribution as the CPU's, token by token.
TEST(GpuSamplerTest, EverySeedAgreesOnOneRow) {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 129280;
  const auto logits = Logits(1, vocab, 0, 7);
  gpu::DeviceBuffer dev(logits.size() * sizeof(float));
  gpu::CopyToDeviceSync(dev.get(), logits.data(), logits.size() * sizeof(float));
  gpu::Stream stream;
  CudaSampler cuda(vocab, 256);
  sampler::SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<RunDraw> draws;
  for (int i = 0; i < 256; ++i) {
    auto c = std::make_unique<Case>();
    c->params = p;
    c->seed = 77;
    c->position = i;
    draws.push_back(ToDraw(*c, 0));
    cases.push_back(std::move(c));
  }
  const auto got = cuda.Sample(dev.as<float>(), draws, stream.get());
  sampler::Sampler cpu;
  for (size_t i = 0; i < draws.size(); ++i) {
    ASSERT_EQ(got[i].id, cpu.Sample(logits.data(), vocab, draws[i].input).id) << "position " << i;
  }
}

}  // namespace
}  // namespace dsinfer::executor
