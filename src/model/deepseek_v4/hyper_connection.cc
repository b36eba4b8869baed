#include "model/deepseek_v4/hyper_connection.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/ops.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

namespace {

// mix [n, outs] = RMS-normalized flat streams @ fn^T (transformers normalizes, then projects).
std::vector<float> Mix(const std::vector<float>& fn, int64_t outs, const float* X, int64_t n,
                       int64_t width, float eps, ThreadPool* pool) {
  std::vector<float> flat(X, X + n * width);
  cpu::RmsNorm(flat.data(), n, width, nullptr, eps);
  std::vector<float> mix(static_cast<size_t>(n * outs));
  cpu::Linear(flat.data(), n, width, fn.data(), outs, mix.data(), pool);
  return mix;
}

}  // namespace

std::vector<float> HcEmbed(const Matrix& embed, const std::vector<int32_t>& ids, int64_t hc,
                           int64_t D) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> X(static_cast<size_t>(n * hc * D));
  for (int64_t t = 0; t < n; ++t) {
    float* x0 = X.data() + t * hc * D;
    embed.CopyRow(ids[t], x0);
    for (int64_t i = 1; i < hc; ++i) std::copy_n(x0, D, x0 + i * D);
  }
  return X;
}

void HcMixes(const HyperConnectionWeights& w, const io::DeepseekV4Config& c, const float* X,
             int64_t n, float* pre, float* post, float* comb, ThreadPool* pool) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size, outs = (2 + hc) * hc;
  const float eps = static_cast<float>(c.hc_eps);
  std::vector<float> mix = Mix(w.fn, outs, X, n, hc * D, static_cast<float>(c.rms_norm_eps), pool);
  for (int64_t t = 0; t < n; ++t) {
    const float* m = mix.data() + t * outs;
    for (int i = 0; i < hc; ++i) {
      pre[t * hc + i] = cpu::Sigmoid(m[i] * w.scale[0] + w.base[i]) + eps;
      post[t * hc + i] = 2.0f * cpu::Sigmoid(m[hc + i] * w.scale[1] + w.base[hc + i]);
    }
    float* C = comb + t * hc * hc;
    for (int j = 0; j < hc * hc; ++j) C[j] = m[2 * hc + j] * w.scale[2] + w.base[2 * hc + j];
    for (int j = 0; j < hc; ++j) {
      cpu::Softmax(C + j * hc, hc);
      for (int k = 0; k < hc; ++k) C[j * hc + k] += eps;
    }
    auto normalize_columns = [&] {
      for (int k = 0; k < hc; ++k) {
        float s = 0;
        for (int j = 0; j < hc; ++j) s += C[j * hc + k];
        for (int j = 0; j < hc; ++j) C[j * hc + k] /= (s + eps);
      }
    };
    normalize_columns();
    for (int it = 0; it + 1 < c.hc_sinkhorn_iters; ++it) {
      for (int j = 0; j < hc; ++j) {
        float s = 0;
        for (int k = 0; k < hc; ++k) s += C[j * hc + k];
        for (int k = 0; k < hc; ++k) C[j * hc + k] /= (s + eps);
      }
      normalize_columns();
    }
  }
}

void HcCollapse(const io::DeepseekV4Config& c, const float* X, const float* pre, int64_t n,
                float* u) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  for (int64_t t = 0; t < n; ++t) {
    float* ut = u + t * D;
    const float* Xt = X + t * hc * D;
    const float* p = pre + t * hc;
    for (int64_t d = 0; d < D; ++d) {
      float s = 0;
      for (int i = 0; i < hc; ++i) s += p[i] * Xt[i * D + d];
      ut[d] = s;
    }
  }
}

void HcPre(const HyperConnectionWeights& w, const io::DeepseekV4Config& c, const float* X,
           int64_t n, float* u, float* post, float* comb, ThreadPool* pool) {
  std::vector<float> pre(static_cast<size_t>(n * c.hc_mult));
  HcMixes(w, c, X, n, pre.data(), post, comb, pool);
  HcCollapse(c, X, pre.data(), n, u);
}

void HcPost(const io::DeepseekV4Config& c, const float* y, const float* post, const float* comb,
            int64_t n, float* X) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  std::vector<float> old(static_cast<size_t>(hc * D));
  for (int64_t t = 0; t < n; ++t) {
    float* Xt = X + t * hc * D;
    old.assign(Xt, Xt + hc * D);
    const float* C = comb + t * hc * hc;
    for (int k = 0; k < hc; ++k) {
      const float p = post[t * hc + k];
      for (int64_t d = 0; d < D; ++d) {
        float s = p * y[t * D + d];
        for (int j = 0; j < hc; ++j) s += C[j * hc + k] * old[j * D + d];
        Xt[k * D + d] = s;
      }
    }
  }
}

void HcHead(const HyperHeadWeights& w, const io::DeepseekV4Config& c, const float* X, int64_t n,
            float* out, ThreadPool* pool) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  std::vector<float> mix = Mix(w.fn, hc, X, n, hc * D, static_cast<float>(c.rms_norm_eps), pool);
  for (int64_t t = 0; t < n; ++t) {
    float pre[16];  // hc_mult <= 16 (DeepseekV4Config::Validate)
    for (int i = 0; i < hc; ++i) {
      pre[i] = cpu::Sigmoid(mix[t * hc + i] * w.scale[0] + w.base[i]) + static_cast<float>(c.hc_eps);
    }
    const float* Xt = X + t * hc * D;
    for (int64_t d = 0; d < D; ++d) {
      float s = 0;
      for (int i = 0; i < hc; ++i) s += pre[i] * Xt[i * D + d];
      out[t * D + d] = s;
    }
  }
}

}  // namespace dsinfer::model::deepseek_v4
