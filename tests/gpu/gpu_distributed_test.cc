// The NCCL communicator (distributed/nccl_communicator.h): a group of one rank per GPU, a thread
// each, delivers every AllToAll buffer (sizes 0 to a few KB, many rounds, barriers) — on one GPU
// a group of one, on two or more a group over them — and the MoE's expert-parallel exchange over
// it gives the single-device MoE's bits; a wrong buffer count fails the group at once. Skipped
// without a device or without NCCL in the build.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "distributed/expert_placement.h"
#include "distributed/nccl_communicator.h"
#include "model/deepseek_v4/moe.h"
#include "model_test_util.h"

namespace dsinfer::distributed {
namespace {

int Devices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#define SKIP_WITHOUT_NCCL()                             \
  if (Devices() == 0) GTEST_SKIP() << "no CUDA device"; \
  if (!NcclAvailable()) GTEST_SKIP() << "this build has no NCCL communicator"

std::vector<int> AllDevices() {
  std::vector<int> d(static_cast<size_t>(std::min(Devices(), 8)));
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<int>(i);
  return d;
}

Bytes Message(int from, int to, int round) {
  Bytes b(static_cast<size_t>((from * 7 + to * 3 + round * 5) % 13) * 301);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<uint8_t>(from * 31 + to * 17 + round + i);
  return b;
}

TEST(NcclCommunicatorTest, AllToAllDeliversEveryBuffer) {
  SKIP_WITHOUT_NCCL();
  for (const std::vector<int>& devices : {std::vector<int>{0}, AllDevices()}) {
    auto made = MakeNcclGroup(devices);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    auto& group = *made;
    const int size = static_cast<int>(devices.size());
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        for (int round = 0; round < 40; ++round) {
          std::vector<Bytes> send;
          for (int to = 0; to < size; ++to) send.push_back(Message(r, to, round));
          auto recv = group[r]->AllToAll(std::move(send));
          if (!recv.ok()) {
            ADD_FAILURE() << recv.status().ToString();
            ++failures;
            return;
          }
          for (int from = 0; from < size; ++from) {
            if ((*recv)[from] != Message(from, r, round)) ++failures;
          }
          if (round % 10 == 0 && !group[r]->Barrier().ok()) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0) << size << " ranks";
  }
}

TEST(NcclCommunicatorTest, RefusesBadGroupsAndBufferCounts) {
  SKIP_WITHOUT_NCCL();
  EXPECT_FALSE(MakeNcclGroup({}).ok());
  EXPECT_FALSE(MakeNcclGroup({Devices()}).ok());
  if (Devices() >= 2) {
    EXPECT_FALSE(MakeNcclGroup({1, 1}).ok());
  }
  auto made = MakeNcclGroup({0});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ((*made)[0]->AllToAll(std::vector<Bytes>(2)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE((*made)[0]->Barrier().ok());  // the group failed
}

// The CPU MoE's expert-parallel exchange over NCCL: every rank's rows as the single-device MoE's.
TEST(NcclCommunicatorTest, ExpertParallelMoeOverNcclIsExact) {
  SKIP_WITHOUT_NCCL();
  const std::vector<int> devices = AllDevices();
  const int ranks = static_cast<int>(devices.size());
  io::DeepseekV4Config c = testing::SmallConfig();
  const int64_t D = c.hidden_size, E = c.n_routed_experts;
  std::mt19937 rng(23);
  model::deepseek_v4::MoeWeights w = testing::RandomMoeWeights(c, rng, /*shared=*/false);
  w.bias.assign(static_cast<size_t>(E), 0.0f);
  const int64_t n = 16;
  const std::vector<float> x = testing::RandomFloats(n * D, rng);
  std::vector<int32_t> ids(static_cast<size_t>(n), 1);
  std::vector<float> want(static_cast<size_t>(n * D));
  model::deepseek_v4::MoeForward(w, c, x.data(), ids.data(), n, want.data(), nullptr);

  auto made = MakeNcclGroup(devices);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const ExpertPlacement place = ExpertPlacement::Contiguous(static_cast<int>(E), ranks);
  std::vector<std::vector<float>> got(static_cast<size_t>(ranks));
  std::vector<Status> status(static_cast<size_t>(ranks), Status::Ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> xr;
      for (int64_t t = r; t < n; t += ranks)
        xr.insert(xr.end(), x.begin() + t * D, x.begin() + (t + 1) * D);
      const int64_t m = static_cast<int64_t>(xr.size()) / D;
      got[r].resize(xr.size());
      const model::deepseek_v4::MoeParallel ep{(*made)[r].get(), &place, nullptr, nullptr};
      status[r] = model::deepseek_v4::MoeForwardParallel(w, c, xr.data(), ids.data(), m,
                                                         got[r].data(), nullptr, ep);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r].ToString();
    int64_t i = 0;
    for (int64_t t = r; t < n; t += ranks, ++i) {
      EXPECT_EQ(std::memcmp(got[r].data() + i * D, want.data() + t * D, D * sizeof(float)), 0)
          << "row " << t;
    }
  }
}

}  // namespace
}  // namespace dsinfer::distributed
