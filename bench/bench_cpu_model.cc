// CPU model benchmark: prefill and decode tokens/s of one request on a model dir, against this
// machine's memory-bandwidth bound (decode reads every active weight once per token).
// Prints JSON lines. Usage: bench_cpu_model MODEL_DIR [prompt_len] [decode_steps] [threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "model/deepseek_v4/model.h"

using namespace dsinfer;
using namespace dsinfer::model::deepseek_v4;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Copy bandwidth (bytes read + written per second) over a buffer far larger than the caches.
double MeasureCopyBandwidth() {
  const size_t n = size_t{512} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), n);
    auto t1 = Clock::now();
    best = std::max(best, 2.0 * n / Seconds(t0, t1));
    a[rep] = b[n - 1 - rep];
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [prompt_len] [decode_steps] [threads]\n", argv[0]);
    return 2;
  }
  const int prompt = argc > 2 ? std::atoi(argv[2]) : 512;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 32;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 0;
  auto m = Model::Load(argv[1], {threads});
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    return 1;
  }
  Model& model = **m;
  const auto& c = model.config();
  std::vector<int32_t> ids(prompt);
  for (int i = 0; i < prompt; ++i) ids[i] = (i * 7919 + 13) % static_cast<int>(c.vocab_size);

  auto state = model.NewSequence();
  auto t0 = Clock::now();
  auto out = model.Forward({{state.get(), ids}}, LogitsRows::kLast);
  auto t1 = Clock::now();
  if (!out.ok()) return 1;
  const double prefill_s = Seconds(t0, t1);

  int32_t next = 0;
  auto t2 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    const auto& lg = out->logits;
    next = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    out = model.Forward({{state.get(), {next}}}, LogitsRows::kLast);
    if (!out.ok()) return 1;
  }
  auto t3 = Clock::now();
  const double decode_s = Seconds(t2, t3);
  const double bw = MeasureCopyBandwidth();
  const double bytes = static_cast<double>(model.ActiveWeightBytes());
  const double bound_tps = bw / bytes;
  const double decode_tps = steps / decode_s;
  std::printf(
      "{\"bench\": \"cpu_model\", \"model\": \"%s\", \"threads\": %d, \"prompt\": %d, "
      "\"prefill_tok_s\": %.1f, \"decode_steps\": %d, \"decode_tok_s\": %.2f, "
      "\"decode_ms_per_token\": %.2f, \"active_weight_bytes\": %.0f, \"copy_bandwidth_gb_s\": %.2f, "
      "\"decode_bound_tok_s\": %.2f, \"decode_ratio_to_bound\": %.3f}\n",
      argv[1], threads, prompt, prompt / prefill_s, steps, decode_tps, 1e3 * decode_s / steps, bytes,
      bw / 1e9, bound_tps, decode_tps / bound_tps);
  return 0;
}
