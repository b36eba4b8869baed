// Engine benchmark: offline throughput of the whole runtime (scheduler, state cache, sampler, model)
// on a model dir. Submits `requests` random-id prompts of `prompt_len` tokens at once, each
// generating exactly `max_tokens` tokens (ignore_eos, seeded sampling with top_k 50), and prints one
// JSON line: requests, tokens, wall time, output and total tokens/s, TTFT and TPOT percentiles (TTFT
// counts from submission, so it includes queueing in this offline batch).
// Usage: bench_engine MODEL_DIR [requests] [prompt_len] [max_tokens] [threads] [max_batch_tokens]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "cli/run_summary.h"
#include "dsinfer/engine.h"

int main(int argc, char** argv) {
  using namespace dsinfer;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_engine MODEL_DIR [requests] [prompt_len] [max_tokens] [threads] "
                         "[max_batch_tokens]\n");
    return 2;
  }
  const int requests = argc > 2 ? std::atoi(argv[2]) : 16;
  const int prompt_len = argc > 3 ? std::atoi(argv[3]) : 128;
  const int max_tokens = argc > 4 ? std::atoi(argv[4]) : 32;
  EngineOptions o;
  o.model_dir = argv[1];
  o.num_threads = argc > 5 ? std::atoi(argv[5]) : 0;
  o.max_batch_tokens = argc > 6 ? std::atoll(argv[6]) : 256;
  auto engine = Engine::Create(o);
  if (!engine.ok()) {
    std::fprintf(stderr, "bench_engine: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  std::mt19937 rng(1);
  std::vector<GenerateRequest> reqs(static_cast<size_t>(requests));
  for (int i = 0; i < requests; ++i) {
    auto& r = reqs[i];
    r.prompt_ids.resize(static_cast<size_t>(prompt_len));
    for (auto& id : r.prompt_ids) id = static_cast<int32_t>(rng() % (*engine)->vocab_size());
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.top_k = 50;
    r.params.seed = static_cast<uint64_t>(i);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto results = (*engine)->Generate(reqs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cli::RunSummary summary;
  for (const auto& r : results) summary.Add(r);
  summary.set_wall_seconds(wall);
  summary.set_engine_stats((*engine)->Stats());
  auto j = summary.ToJson();
  j["bench"] = "engine_offline";
  j["model"] = o.model_dir;
  j["threads"] = o.num_threads;
  j["prompt_len"] = prompt_len;
  j["max_tokens"] = max_tokens;
  j["max_batch_tokens"] = o.max_batch_tokens;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
