// The linear layers of flash-l8 (V4-Flash dimensions) at decode batch 1, one shape at a time, on
// the GPU: device time per launch from CUDA-graph replay of kReps launches that rotate over enough
// weight copies (> 2 x the 50 MB L2) that every launch reads its weights from HBM. Bound = weight
// bytes / the measured device-to-device copy bandwidth. FP8/FP4 shapes run the tensor-core linear
// (--qlinear-warps N: warps per block), bf16 ones the decode GEMV (--gemv none: the general kernel
// instead; --no-gemv-dual unfused SwiGLU pairs); --no-pdl without programmatic launch; --l2 reads
// one weight copy again and again (L2-resident up to ~40 MB: how fast a kernel is when its bytes
// cost little); --only NAME one shape; --prequant FP8/FP4 inputs quantized once up front (no
// in-kernel quantization). Dense shapes also report read_us: the same bytes and rotation read by a
// plain streaming kernel.
//   bench_gemv [m] [flags]   (m: x rows, default 1)   ->  one JSON line per shape
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/linear.cuh"
#include "backend/cuda/random_fill.cuh"
#include "backend/cuda/runtime.h"
#include "gpu_bench.h"

namespace gpu = dsinfer::backend::cuda;
using dsinfer::bench::MedianGraphUs;
using gpu::WeightFormat;

namespace {

struct Shape {
  const char* name;
  WeightFormat format;
  int64_t n, k;
  int64_t groups = 0;    // wo_a: 8 groups, each reading its own k columns of x
  bool swiglu = false;   // W1 and W3 fused (shared expert)
  int experts = 0;       // routed: this many experts, one x row each
};

struct Weights {
  std::vector<gpu::DeviceBuffer> data, scale;
};

Weights MakeCopies(const Shape& s, int copies, gpu::StreamHandle st) {
  Weights w;
  const dsinfer::bench::WeightBytes b = dsinfer::bench::GpuWeightBytes(s.format, s.n, s.k);
  for (int c = 0; c < copies; ++c) {
    w.data.emplace_back(static_cast<size_t>(b.data));
    w.scale.emplace_back(static_cast<size_t>(b.scale));
    dsinfer::bench::FillRandomWeight(s.format, s.n, s.k, 1000 + c, w.data.back().get(),
                                     w.scale.back().get(), st);
  }
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (!gpu::DeviceAvailable()) {
    std::fprintf(stderr, "bench_gemv: no CUDA device\n");
    return 1;
  }
  int64_t m = 1;
  bool l2 = false, prequant = false;
  std::string only, kernel = "gemv:f32,bf16";
  gpu::KernelOptions ko;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--l2") {
      l2 = true;
    } else if (a == "--prequant") {
      prequant = true;
    } else if (a == "--no-pdl") {
      ko.pdl = false;
    } else if (a == "--no-gemv-dual") {
      ko.gemv_dual = false;
      kernel += ",nodual";
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--gemv" && has_value) {
      const std::string g = argv[++i];
      ko.gemv_f32 = g.find("f32") != std::string::npos;
      ko.gemv_bf16 = g.find("bf16") != std::string::npos;
      kernel = "gemv:" + g + (ko.gemv_dual ? "" : ",nodual");
    } else if (a == "--qlinear-warps" && has_value) {
      ko.qlinear_warps = std::max(1, std::min(16, std::atoi(argv[++i])));
    } else if (!a.empty() && a[0] != '-') {
      m = std::atoll(a.c_str());
    } else {
      std::fprintf(stderr, "bench_gemv: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  kernel += ";qlinear_warps:" +
            (ko.qlinear_warps > 0 ? std::to_string(ko.qlinear_warps) : std::string("default"));
  gpu::SetKernelOptions(ko);
  const std::vector<Shape> shapes = {
      {"wq_a", WeightFormat::kFp8, 1024, 4096},
      {"wq_b", WeightFormat::kFp8, 32768, 1024},
      {"wkv", WeightFormat::kFp8, 512, 4096},
      {"idx_wq_b", WeightFormat::kFp8, 8192, 1024},
      {"wo_a", WeightFormat::kFp8, 8192, 4096, 8},
      {"wo_b", WeightFormat::kFp8, 4096, 8192},
      {"shared_w13", WeightFormat::kFp8, 2048, 4096, 0, true},
      {"shared_w2", WeightFormat::kFp8, 4096, 2048},
      {"comp_wkv_csa", WeightFormat::kBf16, 1024, 4096},
      {"comp_wkv_hca", WeightFormat::kBf16, 512, 4096},
      {"idx_comp_wkv", WeightFormat::kBf16, 256, 4096},
      {"weights_proj", WeightFormat::kBf16, 64, 4096},
      {"gate", WeightFormat::kBf16, 256, 4096},
      {"head", WeightFormat::kBf16, 129280, 4096},
      {"experts_w13", WeightFormat::kFp4, 2048, 4096, 0, true, 6},
      {"experts_w2", WeightFormat::kFp4, 4096, 2048, 0, false, 6},
  };
  gpu::Stream st;
  // Copy bandwidth (read + write) of a 2 GiB device-to-device copy.
  double copy_gbps = 0;
  {
    const size_t bytes = size_t{1} << 31;
    gpu::DeviceBuffer a(bytes), b(bytes);
    gpu::CopyDeviceToDevice(b.get(), a.get(), bytes, st.get());
    gpu::EventTimer t;
    t.Start(st.get());
    for (int i = 0; i < 5; ++i) gpu::CopyDeviceToDevice(b.get(), a.get(), bytes, st.get());
    copy_gbps = 2.0 * 5 * bytes / (t.StopMs(st.get()) * 1e-3) / 1e9;
  }
  const bool pdl = ko.pdl;
  std::printf("{\"bench\": \"gemv_setup\", \"device\": \"%s\", \"copy_GBps\": %.0f, \"m\": %lld, "
              "\"kernel\": \"%s\", \"pdl\": %s}\n",
              gpu::DeviceDescription().c_str(), copy_gbps, static_cast<long long>(m), kernel.c_str(),
              pdl ? "true" : "false");
  constexpr int kReps = 40;
  for (const Shape& s : shapes) {
    if (!only.empty() && only != s.name) continue;
    const int mats = s.experts > 0 ? s.experts : 1;
    const int per_launch = (s.swiglu ? 2 : 1) * mats;  // matrices read per launch
    gpu::WeightRef probe;
    probe.format = s.format; probe.n = s.n; probe.k = s.k;
    probe.scale_format = gpu::ScaleFormat::kUe8m0;
    const double launch_bytes = static_cast<double>(probe.bytes()) * per_launch;
    // --l2: one weight copy, read again by every launch (L2-resident when it fits).
    const int copies =
        l2 ? per_launch
           : static_cast<int>(std::max<double>(2.0, 120e6 / launch_bytes + 1)) * per_launch;
    Weights w = MakeCopies(s, copies, st.get());
    const int64_t xk = s.groups > 0 ? s.groups * s.k : s.k;
    const int64_t rows = s.experts > 0 ? s.experts : m;
    gpu::DeviceBuffer x(static_cast<size_t>(rows * xk * 4)), y(static_cast<size_t>(rows * s.n * 4)),
        u(static_cast<size_t>(rows * s.n * 4));
    {
      gpu::RandomFillParams f;
      f.data = x.get(); f.count = rows * xk; f.seed = 7;
      gpu::LaunchRandomFill(f, st.get());
    }
    // Routing tables for the expert shapes: slot i = expert i with pair i (one token per expert).
    std::vector<gpu::DeviceBuffer> tables;
    std::vector<std::vector<const void*>> ptr_host;
    gpu::DeviceBuffer active(64 * 4), num_active(4), offsets(65 * 4), pairs(64 * 4);
    if (s.experts > 0) {
      std::vector<int32_t> a(s.experts), o(s.experts + 1), pr(s.experts);
      for (int i = 0; i < s.experts; ++i) { a[i] = i; o[i] = i; pr[i] = i; }
      o[s.experts] = s.experts;
      const int32_t na = s.experts;
      gpu::CopyToDeviceSync(active.get(), a.data(), a.size() * 4);
      gpu::CopyToDeviceSync(offsets.get(), o.data(), o.size() * 4);
      gpu::CopyToDeviceSync(pairs.get(), pr.data(), pr.size() * 4);
      gpu::CopyToDeviceSync(num_active.get(), &na, 4);
      // Per copy set c: 4 pointer tables (w1 data/scale, w3 data/scale) of s.experts entries.
      const int sets = copies / per_launch;
      for (int c = 0; c < sets; ++c) {
        for (int t = 0; t < 4; ++t) {
          std::vector<const void*> v(s.experts);
          for (int e = 0; e < s.experts; ++e) {
            const int idx = c * per_launch + (s.swiglu ? 2 * e + t / 2 : e);
            v[e] = t % 2 == 0 ? w.data[idx].get() : w.scale[idx].get();
          }
          tables.emplace_back(v.size() * sizeof(void*));
          gpu::CopyToDeviceSync(tables.back().get(), v.data(), v.size() * sizeof(void*));
        }
      }
    }
    // --prequant: FP8/FP4 inputs quantized once before the timed launches (as the MoE's decode
    // path does), so the kernels skip their own quantization.
    const bool preq =
        prequant && (s.format == WeightFormat::kFp8 || s.format == WeightFormat::kFp4);
    gpu::DeviceBuffer xq_buf(preq ? static_cast<size_t>(rows * gpu::QuantizedLd(xk) * 2) : 1),
        xs_buf(preq ? static_cast<size_t>(rows * gpu::QuantizedScales(xk) * 4) : 1);
    gpu::QuantizedRows xq;
    if (preq)
      xq = gpu::LaunchActQuantRows(x.as<float>(), xk, rows, xk, xq_buf.as<uint16_t>(),
                                   xs_buf.as<float>(), st.get());
    auto launch = [&](int rep) {
      const int set = rep % (copies / per_launch);
      if (s.experts > 0) {
        gpu::ExpertLinearParams p;
        p.shape = probe;
        const auto tab = [&](int t) { return tables[static_cast<size_t>(set * 4 + t)].as<const void*>(); };
        p.data = tab(0); p.scale = tab(1);
        p.x = x.as<float>(); p.ldx = s.k; p.x_row_div = 1; p.y = y.as<float>(); p.ldy = s.n;
        p.active = active.as<int32_t>(); p.num_active = num_active.as<int32_t>();
        p.offsets = offsets.as<int32_t>(); p.pairs = pairs.as<int32_t>();
        p.max_slots = s.experts; p.total_pairs = s.experts;
        if (preq) p.xq = xq;
        if (s.swiglu) gpu::LaunchExpertLinearSwiglu(p, tab(2), tab(3), u.as<float>(), 7.0f, st.get());
        else gpu::LaunchExpertLinear(p, st.get());
        return;
      }
      gpu::LinearParams p;
      p.w = probe;
      p.w.data = w.data[static_cast<size_t>(set * per_launch)].get();
      p.w.scale = w.scale[static_cast<size_t>(set * per_launch)].get();
      p.x = x.as<float>(); p.ldx = xk; p.m = m; p.y = y.as<float>(); p.ldy = s.n;
      if (s.groups > 0) { p.x_group_rows = s.n / s.groups; p.x_group_stride = s.k; }
      if (preq) p.xq = xq;
      if (s.swiglu) {
        gpu::WeightRef w3 = p.w;
        w3.data = w.data[static_cast<size_t>(set * per_launch + 1)].get();
        w3.scale = w.scale[static_cast<size_t>(set * per_launch + 1)].get();
        gpu::LaunchLinearSwiglu(p, w3, u.as<float>(), 7.0f, st.get());
      } else {
        gpu::LaunchLinear(p, st.get());
      }
    };
    for (int r = 0; r < 3; ++r) launch(r);
    const double us = MedianGraphUs(launch, kReps, st.get());
    const double bound_us = launch_bytes / (copy_gbps * 1e9) * 1e6;
    // The same bytes and rotation read by a plain streaming kernel (dense shapes): what a linear
    // could at best reach here, launch and ramp included.
    double read_us = -1;
    if (s.experts == 0) {
      gpu::DeviceBuffer sink(4);
      auto probe_set = [&](int rep) {
        const int set = rep % (copies / per_launch);
        for (int i = 0; i < per_launch; ++i) {
          const auto& d = w.data[static_cast<size_t>(set * per_launch + i)];
          gpu::LaunchReadProbe(d.get(), static_cast<int64_t>(d.bytes()), sink.as<uint32_t>(),
                               st.get());
        }
      };
      read_us = MedianGraphUs(probe_set, kReps, st.get());
    }
    std::printf("{\"bench\": \"gemv\", \"shape\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
                "\"MB\": %.2f, \"us\": %.2f, \"bound_us\": %.2f, \"ratio_to_bound\": %.2f, "
                "\"GBps\": %.0f, \"read_us\": %.2f}\n",
                s.name, static_cast<long long>(rows), static_cast<long long>(s.n),
                static_cast<long long>(s.k), launch_bytes / 1e6, us, bound_us, us / bound_us,
                launch_bytes / (us * 1e-6) / 1e9, read_us);
    gpu::CheckLastError("bench_gemv");
  }
  return 0;
}
