// Expert parallelism on the GPU (CudaExpertParallel: ranks sharing the device, the MoE layers'
// rows exchanged through the host): each sequence's logits are the single CUDA model's bit for
// bit, on whichever rank it lives, with other ranks idle or busy, over prefill chunks and decode
// steps; each rank holds only its experts; bad placements and a failed rank are clear errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/runtime.h"
#include "distributed/communicator.h"
#include "distributed/expert_placement.h"
#include "model/deepseek_v4/cuda/cuda_expert_parallel.h"
#include "model/deepseek_v4/cuda/cuda_model.h"
#include "model/deepseek_v4/init_presets.h"
#include "test_util.h"

namespace dsinfer::model::deepseek_v4::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device"

// The tiny preset (hash and top-k MoE layers, every attention kind) in the official formats:
// FP8 dense, FP4 routed experts.
std::string TinyOfficialDir() {
  static const std::string dir = [] {
    const std::string d = testing::ScratchDir("gpu_ep_tiny_official");
    auto cfg = PresetConfig("tiny");
    EXPECT_TRUE(cfg.ok());
    EXPECT_TRUE(WriteRandomModel(*cfg, d, 5, WeightFormat::kOfficial).ok());
    return d;
  }();
  return dir;
}

CudaModelOptions Options() {
  CudaModelOptions o;
  o.max_seqs = 3;
  o.max_len = 256;
  o.max_tokens = 64;
  return o;
}

std::vector<int32_t> Prompt(int seq, int len) {
  std::vector<int32_t> ids;
  for (int i = 0; i < len; ++i) ids.push_back((i * 7919 + 31 * seq + 5) % 200 + 3);
  return ids;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// A schedule of steps; each step gives some of the 3 sequences a chunk (empty: sits out).
using Schedule = std::vector<std::vector<std::vector<int32_t>>>;
Schedule MixedSchedule() {
  const auto p0 = Prompt(0, 40), p1 = Prompt(1, 23), p2 = Prompt(2, 9);
  Schedule s;
  s.push_back({{p0.begin(), p0.begin() + 17}, p1, {}});  // sequence 2 not started
  s.push_back({{p0.begin() + 17, p0.end()}, {}, p2});    // sequence 1 sits out
  for (int t = 0; t < 4; ++t) s.push_back({{11 + t}, {22 + t}, {33 + t}});  // decode steps
  s.push_back({{}, {}, {44}});                                              // one sequence alone
  return s;
}

// The single model's logits (all rows) of each sequence's chunk at each step.
std::vector<std::vector<std::vector<float>>> RunSingle(const Schedule& s) {
  auto m = CudaModel::Load(TinyOfficialDir(), Options());
  EXPECT_TRUE(m.ok()) << m.status().message();
  std::vector<int> slots;
  for (int q = 0; q < 3; ++q) slots.push_back(*(*m)->NewSequence());
  std::vector<std::vector<std::vector<float>>> out(s.size(), std::vector<std::vector<float>>(3));
  const int64_t V = (*m)->config().vocab_size;
  for (size_t step = 0; step < s.size(); ++step) {
    std::vector<CudaModel::Chunk> chunks;
    std::vector<int> who;
    for (int q = 0; q < 3; ++q) {
      if (s[step][q].empty()) continue;
      chunks.push_back({slots[q], s[step][q]});
      who.push_back(q);
    }
    auto logits = (*m)->Forward(chunks, LogitsRows::kAll);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    int64_t row = 0;
    for (size_t i = 0; i < who.size(); ++i) {
      const int64_t rows = static_cast<int64_t>(chunks[i].ids.size());
      out[step][who[i]].assign(logits->begin() + row * V, logits->begin() + (row + rows) * V);
      row += rows;
    }
  }
  return out;
}

// The same schedule over `ranks` ranks, sequence q on rank home[q].
void CheckExpertParallel(int ranks, const std::vector<int>& home) {
  const Schedule s = MixedSchedule();
  const auto want = RunSingle(s);
  auto ep = CudaExpertParallel::Load(TinyOfficialDir(), Options(), ranks);
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  std::vector<int> slots;
  for (int q = 0; q < 3; ++q) slots.push_back(*(*ep)->model(home[q]).NewSequence());
  const int64_t V = (*ep)->model(0).config().vocab_size;
  for (size_t step = 0; step < s.size(); ++step) {
    std::vector<std::vector<CudaModel::Chunk>> chunks(static_cast<size_t>(ranks));
    std::vector<std::vector<int>> who(static_cast<size_t>(ranks));
    for (int q = 0; q < 3; ++q) {
      if (s[step][q].empty()) continue;
      chunks[home[q]].push_back({slots[q], s[step][q]});
      who[home[q]].push_back(q);
    }
    auto logits = (*ep)->Forward(chunks, LogitsRows::kAll);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    for (int r = 0; r < ranks; ++r) {
      int64_t row = 0;
      for (size_t i = 0; i < who[r].size(); ++i) {
        const int q = who[r][i];
        const int64_t rows = static_cast<int64_t>(s[step][q].size());
        const std::vector<float> got((*logits)[r].begin() + row * V,
                                     (*logits)[r].begin() + (row + rows) * V);
        EXPECT_TRUE(BitEqual(got, want[step][q]))
            << ranks << " ranks: sequence " << q << " on rank " << r << ", step " << step;
        row += rows;
      }
    }
  }
}

TEST(GpuExpertParallelTest, TwoRanksGiveTheSingleModelsLogits) {
  SKIP_WITHOUT_GPU();
  CheckExpertParallel(2, {0, 1, 0});
}

TEST(GpuExpertParallelTest, ThreeRanksWithIdleRanksGiveTheSingleModelsLogits) {
  SKIP_WITHOUT_GPU();
  CheckExpertParallel(3, {2, 0, 2});  // rank 1 serves only; the last step has one rank busy
}

TEST(GpuExpertParallelTest, EachRankHoldsItsExperts) {
  SKIP_WITHOUT_GPU();
  auto single = CudaModel::Load(TinyOfficialDir(), Options());
  ASSERT_TRUE(single.ok());
  auto ep = CudaExpertParallel::Load(TinyOfficialDir(), Options(), 4);
  ASSERT_TRUE(ep.ok()) << ep.status().message();
  const int64_t layers = (*single)->config().num_layers;
  const size_t expert = (*single)->expert_bytes();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ((*ep)->model(r).weight_bytes() + 6 * layers * expert, (*single)->weight_bytes())
        << "rank " << r << " holds 2 of the 8 experts of each layer";
    EXPECT_EQ((*ep)->placement(0).ExpertsOf(r).size(), 2u);
  }
}

TEST(GpuExpertParallelTest, BadGroupsAndFailuresAreClearErrors) {
  SKIP_WITHOUT_GPU();
  auto cfg = PresetConfig("tiny");
  ASSERT_TRUE(cfg.ok());
  // A model loaded without an expert filter cannot join; placements must match the model.
  auto plain = CudaModel::Load(TinyOfficialDir(), Options());
  ASSERT_TRUE(plain.ok());
  auto group = distributed::MakeLocalGroup(2);
  std::vector<distributed::ExpertPlacement> placements(
      static_cast<size_t>(cfg->num_layers), distributed::ExpertPlacement::Contiguous(8, 2));
  EXPECT_EQ((*plain)->SetExpertParallel({group[0].get(), &placements}).code(),
            StatusCode::kInvalidArgument);
  auto rank1 = CudaModel::Load(TinyOfficialDir(), Options(), [](int, int e) { return e >= 4; });
  ASSERT_TRUE(rank1.ok());
  const int lone = *(*rank1)->NewSequence();
  EXPECT_EQ((*rank1)->Forward({{lone, Prompt(0, 3)}}, LogitsRows::kLast).status().code(),
            StatusCode::kInvalidArgument)
      << "a model holding some experts runs only in its group";
  EXPECT_EQ((*rank1)->SetExpertParallel({group[0].get(), &placements}).code(),
            StatusCode::kInvalidArgument)
      << "rank 0's placement gives it experts 0-3, which this model did not load";
  std::vector<distributed::ExpertPlacement> short_list(placements.begin(), placements.end() - 1);
  EXPECT_EQ((*rank1)->SetExpertParallel({group[1].get(), &short_list}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE((*rank1)->SetExpertParallel({group[1].get(), &placements}).ok());
  EXPECT_EQ((*rank1)->DecodeStep({0}, {5}, true).status().code(), StatusCode::kUnimplemented)
      << "a decode step's graph has no exchange";
  EXPECT_EQ(CudaExpertParallel::Load(TinyOfficialDir(), Options(), 9).status().code(),
            StatusCode::kInvalidArgument)
      << "more ranks than experts";

  // A rank refusing its chunk (a bad slot) fails the forward before any rank starts: rank 0's
  // sequence is untouched, and the next forward gives the single model's logits.
  auto ep = CudaExpertParallel::Load(TinyOfficialDir(), Options(), 2);
  ASSERT_TRUE(ep.ok());
  const int slot = *(*ep)->model(0).NewSequence();
  std::vector<std::vector<CudaModel::Chunk>> bad(2);
  bad[0] = {{slot, Prompt(0, 40)}};
  bad[1] = {{7, Prompt(1, 4)}};
  EXPECT_EQ((*ep)->Forward(bad, LogitsRows::kLast).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*ep)->model(0).length(slot), 0);
  std::vector<std::vector<CudaModel::Chunk>> good(2);
  good[0] = {{slot, Prompt(0, 40)}};
  auto first = (*ep)->Forward(good, LogitsRows::kAll);
  ASSERT_TRUE(first.ok()) << first.status().message();
  const int single_slot = *(*plain)->NewSequence();
  auto want = (*plain)->Forward({{single_slot, Prompt(0, 40)}}, LogitsRows::kAll);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(BitEqual((*first)[0], *want)) << "the refused forward left the sequence as it was";
  good[0] = {{slot, Prompt(0, 4)}};
  EXPECT_EQ((*ep)->Forward(good, LogitsRows::kLast).value()[0].size(),
            static_cast<size_t>((*ep)->model(0).config().vocab_size));
  EXPECT_EQ((*ep)->Forward({good[0]}, LogitsRows::kLast).status().code(),
            StatusCode::kInvalidArgument)
      << "one chunk list per rank";
}

}  // namespace
}  // namespace dsinfer::model::deepseek_v4::cuda
