// The trained demo model (models/demo, unpacked by the demo_model fixture) on the GPU engine with
// MTP speculation: the CUDA model's MTP layer drafts what the CPU's drafts — the acceptance of
// greedy continuations of held-out prose is the CPU's within 2 points (a wrong position, source
// row or ring entry in the MTP metadata moves it; outputs are exact whatever the drafts) and at
// least the 0.5 — also with prompts prefilled in chunks (each chunk's first MTP row reads
// the streams ring), a one-token prompt and n = 2 forks; and the ids are those of the run without
// speculation. Skipped without a device.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../unit/engine_mix.h"
#include "backend/cuda/runtime.h"
#include "dsinfer/engine.h"

namespace dsinfer {
namespace {

std::vector<GenerateRequest> HeldoutPrompts() {
  std::ifstream f(std::string(DSINFER_SOURCE_DIR) + "/tests/data/demo_heldout_windows.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<GenerateRequest> reqs;
  for (const auto& w : j.at("windows")) {
    const std::vector<int32_t> ids = w.get<std::vector<int32_t>>();
    for (size_t at : {size_t{0}, size_t{256}}) {  // two 128-token prompts per window
      GenerateRequest r;
      r.prompt_ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(at),
                          ids.begin() + static_cast<std::ptrdiff_t>(at + 128));
      r.params.temperature = 0;
      r.params.max_tokens = 64;
      r.params.ignore_eos = true;
      reqs.push_back(r);
    }
  }
  GenerateRequest one = reqs[0];  // a one-token prompt: its first draft reads position 0's streams
  one.prompt_ids.resize(1);
  reqs.push_back(one);
  reqs[1].params.n = 2;  // forked siblings (greedy: equal)
  return reqs;
}

struct Outcome {
  std::vector<RequestResult> results;
  EngineStats stats;
  double seconds = 0;
};

Outcome RunEngine(Device device, int k, int max_running, int64_t batch_tokens) {
  EngineOptions o;
  o.model_dir = std::string(DSINFER_BINARY_DIR) + "/demo_model";
  o.device = device;
  o.max_running = max_running;
  o.max_batch_tokens = batch_tokens;
  o.state_memory_bytes = int64_t{512} << 20;
  if (k > 0) {
    o.speculative.method = SpeculativeOptions::Method::kMtp;
    o.speculative.num_tokens = k;
  }
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  Outcome out;
  if (!e.ok()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  out.results = (*e)->Generate(HeldoutPrompts());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.stats = (*e)->Stats();
  return out;
}

double Acceptance(const EngineStats& s) {
  return s.spec_draft_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) /
                                       static_cast<double>(s.spec_draft_tokens)
                                 : 0.0;
}

TEST(GpuDemoModelTest, MtpDraftsAsTheCpuDoesAndKeepTheIds) {
  if (!backend::cuda::DeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  struct Config {
    int max_running;
    int64_t batch_tokens;  // 48: the prompts prefill in chunks beside the others' verify steps
    bool cpu;              // compare with the CPU's acceptance
  };
  for (const Config cfg : {Config{1, 1024, false}, Config{8, 1024, true}, Config{8, 48, true}}) {
    const Outcome plain = RunEngine(Device::kCuda, 0, cfg.max_running, cfg.batch_tokens);
    for (int k : {1, 3}) {
      const Outcome gpu = RunEngine(Device::kCuda, k, cfg.max_running, cfg.batch_tokens);
      const std::string what = "MTP k=" + std::to_string(k) + ", max_running " +
                               std::to_string(cfg.max_running) + ", budget " +
                               std::to_string(cfg.batch_tokens);
      testing::ExpectSame(plain.results, gpu.results, what);
      const double a_gpu = Acceptance(gpu.stats);
      std::printf("[demo] %s: GPU acceptance %.4f (%lld/%lld drafts), %.3f s vs %.3f s without\n",
                  what.c_str(), a_gpu, static_cast<long long>(gpu.stats.spec_accepted_tokens),
                  static_cast<long long>(gpu.stats.spec_draft_tokens), gpu.seconds, plain.seconds);
      EXPECT_GE(a_gpu, k == 1 ? 0.5 : 0.35) << what;
      if (cfg.cpu) {  // the CPU's drafts (its own numerics: within 2 points)
        const Outcome cpu = RunEngine(Device::kCpu, k, cfg.max_running, cfg.batch_tokens);
        const double a_cpu = Acceptance(cpu.stats);
        std::printf("[demo] %s: CPU acceptance %.4f (%lld/%lld drafts)\n", what.c_str(), a_cpu,
                    static_cast<long long>(cpu.stats.spec_accepted_tokens),
                    static_cast<long long>(cpu.stats.spec_draft_tokens));
        EXPECT_NEAR(a_gpu, a_cpu, 0.02) << what;
      }
    }
  }
}

}  // namespace
}  // namespace dsinfer
