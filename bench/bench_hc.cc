// The mHC kernels (spec §2.3) at V4-Flash dimensions (hc 4, D 4,096: 24 mix outputs over 16,384
// inputs, 20 Sinkhorn iterations) on the GPU, one launch at a time, at --tokens rows (default
// 1,32,256,8192), as the model launches them:
//   mix       LaunchHcMix: the first site's mix partials (split-k over 256-input slices);
//   pre       LaunchHcPreFinish from the post's partials (64 slices), with the sublayer norm
//             weight and the act_quant'ed row (what every attention / MoE sublayer takes);
//   post      LaunchHcPost after an attention sublayer: y given, the next site's mix partials;
//   post_moe  LaunchHcPost after a MoE sublayer: the combine of 6 experts' rows and the shared
//             expert's row folded in, the next site's mix partials.
// Device time per launch: CUDA-graph replay (gpu_bench.h MedianGraphUs). mem_bound_us: the bytes
// that must move (each input read once, each output written once, the weights once) at the
// measured copy bandwidth; ratio = us / mem_bound_us (these kernels do a few FLOPs a byte).
// out_hash: FNV-1a of the kernel's outputs after the timing (the pre: xn, post, comb, the
// act_quant'ed row and its scales; the posts: the streams, updated in place by every replay, and
// the next mix's partials), so that two builds of a change that must keep the bits can be
// compared (the same replays in the same order, so the same values).
//   bench_hc [--tokens 1,32,256,8192] [--kernels mix,pre,post,post_moe]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cuda/hyper_connection.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "base/fnv.h"
#include "gpu_bench.h"

namespace gpu = dsinfer::backend::cuda;

namespace {

using dsinfer::bench::RandomFloats;

constexpr int kHc = 4, kNout = (2 + kHc) * kHc, kExperts = 6, kSinkhorn = 20;
constexpr int64_t kD = 4096, kK = kHc * kD;

// The buffers of one token count. comb ~ 0.25 a entry and post ~ 1 keep the streams bounded
// over the replays (each post launch updates X in place).
struct Buffers {
  int64_t n, mix_slices, post_slices, ldq, lds;
  gpu::DeviceBuffer X, y, ey, shared, weight, sel, post, comb, fn, base, scale, norm_w, part,
      post_part, xn, xq, xs;
  Buffers(int64_t tokens, gpu::StreamHandle st)
      : n(tokens),
        mix_slices(gpu::HcMixSlices(kK)),
        post_slices(gpu::HcPostMixSlices(kHc, kD)),
        ldq(gpu::QuantizedLd(kD)),
        lds(gpu::QuantizedScales(kD)),
        X(RandomFloats(n * kK, 1, st)),
        y(RandomFloats(n * kD, 2, st)),
        ey(RandomFloats(n * kExperts * kD, 3, st)),
        shared(RandomFloats(n * kD, 4, st)),
        weight(RandomFloats(n * kExperts, 5, st, 0.16f, 0.02f)),
        sel(static_cast<size_t>(n * kExperts) * sizeof(int32_t)),
        post(RandomFloats(n * kHc, 6, st, 1.0f, 0.1f)),
        comb(RandomFloats(n * kHc * kHc, 7, st, 0.25f, 0.02f)),
        fn(RandomFloats(int64_t{kNout} * kK, 8, st, 0.0f, 0.01f)),
        base(RandomFloats(kNout, 9, st, 0.0f, 0.5f)),
        scale(RandomFloats(3, 10, st, 0.5f, 0.1f)),
        norm_w(RandomFloats(kD, 11, st, 1.0f, 0.1f)),
        part(static_cast<size_t>(n * mix_slices * (kNout + 1)) * sizeof(float)),
        post_part(static_cast<size_t>(n * post_slices * (kNout + 1)) * sizeof(float)),
        xn(static_cast<size_t>(n * kD) * sizeof(float)),
        xq(static_cast<size_t>(n * ldq) * sizeof(uint16_t)),
        xs(static_cast<size_t>(n * lds) * sizeof(float)) {
    // Expert ids with repeats (the combine's rank order sorts them): any ids in [0, 256).
    std::vector<int32_t> ids(static_cast<size_t>(n * kExperts));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + i / 7) % 256);
    gpu::CopyToDeviceSync(sel.get(), ids.data(), ids.size() * sizeof(int32_t));
  }

  gpu::HcMixParams Mix() const {
    gpu::HcMixParams m;
    m.X = X.as<float>();
    m.ldx = kK;
    m.K = kK;
    m.fn = fn.as<float>();
    m.nout = kNout;
    m.n = n;
    m.part = part.as<float>();
    return m;
  }
  gpu::HcPreFinishParams Pre() const {
    gpu::HcPreFinishParams f;
    f.part = post_part.as<float>();
    f.mix_slices = post_slices;
    f.norm_w = norm_w.as<float>();
    f.xn = xn.as<float>();
    f.base = base.as<float>();
    f.scale = scale.as<float>();
    f.X = X.as<float>();
    f.post = post.as<float>();
    f.comb = comb.as<float>();
    f.n = n;
    f.hc = kHc;
    f.D = kD;
    f.sinkhorn_iters = kSinkhorn;
    f.xq = xq.as<uint16_t>();
    f.ldq = ldq;
    f.xs = xs.as<float>();
    f.lds = lds;
    return f;
  }
  gpu::HcPostParams Post(bool moe) const {
    gpu::HcPostParams p;
    if (moe) {
      p.moe.y = ey.as<float>();
      p.moe.sel = sel.as<int32_t>();
      p.moe.weight = weight.as<float>();
      p.moe.shared = shared.as<float>();
      p.moe.n = n;
      p.moe.K = kExperts;
      p.moe.D = kD;
    } else {
      p.y = y.as<float>();
    }
    p.mix_fn = fn.as<float>();
    p.mix_part = post_part.as<float>();
    p.post = post.as<float>();
    p.comb = comb.as<float>();
    p.X = X.as<float>();
    p.n = n;
    p.hc = kHc;
    p.D = kD;
    return p;
  }
};

// FNV-1a over the bytes of device buffers, in order.
uint64_t HashDevice(std::initializer_list<const gpu::DeviceBuffer*> bufs, gpu::StreamHandle st) {
  uint64_t h = dsinfer::kFnv1aOffset;
  for (const gpu::DeviceBuffer* b : bufs) {
    std::vector<unsigned char> host(b->bytes());
    gpu::CopyToHost(host.data(), b->get(), host.size(), st);
    gpu::SynchronizeStream(st);
    h = dsinfer::Fnv1a(host.data(), host.size(), h);
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "bench_hc: no CUDA device\n");
    return 1;
  }
  std::vector<int64_t> tokens = {1, 32, 256, 8192};
  const std::vector<std::string> all = {"mix", "pre", "post", "post_moe"};
  std::vector<std::string> kernels = all;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool v = i + 1 < argc;
    if (a == "--tokens" && v) {
      tokens = dsinfer::bench::ParseIntList(argv[++i]);
    } else if (a == "--kernels" && v) {
      kernels = dsinfer::bench::SplitList(argv[++i]);
      for (const std::string& k : kernels) {
        if (std::find(all.begin(), all.end(), k) == all.end()) {
          std::fprintf(stderr, "bench_hc: unknown kernel %s (mix, pre, post, post_moe)\n",
                       k.c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "bench_hc: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  gpu::Stream stream;
  const gpu::StreamHandle st = stream.get();
  const double gbs = dsinfer::bench::PrintSetup(st);
  for (const int64_t n : tokens) {
    if (n < 1 || n > 65535) {
      std::fprintf(stderr, "bench_hc: --tokens must be in [1, 65535]\n");
      return 2;
    }
    Buffers b(n, st);
    const double nd = static_cast<double>(n);
    const double x_bytes = nd * kK * 4, row_bytes = nd * kD * 4, fn_bytes = double{kNout} * kK * 4;
    const double post_part_bytes = nd * b.post_slices * (kNout + 1) * 4;
    // The post writes the partials the pre reads: run it once first.
    gpu::LaunchHcPost(b.Post(false), st);
    struct Kernel {
      const char* name;
      double bytes;
      std::function<void()> launch;
    };
    for (const Kernel& k : {Kernel{"mix", x_bytes + fn_bytes + nd * b.mix_slices * (kNout + 1) * 4,
                                   [&] { gpu::LaunchHcMix(b.Mix(), st); }},
                            Kernel{"pre",
                                   x_bytes + post_part_bytes + row_bytes + nd * b.ldq * 2 +
                                       nd * b.lds * 4 + nd * kHc * (1 + kHc) * 4,
                                   [&] { gpu::LaunchHcPreFinish(b.Pre(), st); }},
                            Kernel{"post", 2 * x_bytes + row_bytes + fn_bytes + post_part_bytes,
                                   [&] { gpu::LaunchHcPost(b.Post(false), st); }},
                            Kernel{"post_moe",
                                   2 * x_bytes + (kExperts + 1) * row_bytes + nd * kExperts * 8 +
                                       fn_bytes + post_part_bytes,
                                   [&] { gpu::LaunchHcPost(b.Post(true), st); }}}) {
      if (std::find(kernels.begin(), kernels.end(), k.name) == kernels.end()) continue;
      const int reps = n >= 4096 ? 5 : n >= 256 ? 20 : 100;
      const double us = dsinfer::bench::MedianGraphUs([&](int) { k.launch(); }, reps, st);
      const double mem_us = k.bytes / (gbs * 1e9) * 1e6;
      std::string hash;
      if (std::string(k.name) != "mix") {
        const uint64_t h = std::string(k.name) == "pre"
                               ? HashDevice({&b.xn, &b.post, &b.comb, &b.xq, &b.xs}, st)
                               : HashDevice({&b.X, &b.post_part}, st);
        char buf[48];
        std::snprintf(buf, sizeof buf, ", \"out_hash\": \"%016llx\"",
                      static_cast<unsigned long long>(h));
        hash = buf;
      }
      std::printf(
          "{\"bench\": \"hc\", \"kernel\": \"%s\", \"tokens\": %lld, \"us\": %.2f, \"GB\": %.4f, "
          "\"GBps\": %.0f, \"mem_bound_us\": %.2f, \"ratio_to_bound\": %.2f%s}\n",
          k.name, static_cast<long long>(n), us, k.bytes / 1e9, k.bytes / (us * 1e-6) / 1e9, mem_us,
          us / mem_us, hash.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
