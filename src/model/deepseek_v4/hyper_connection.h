// Manifold-constrained hyper-connections (mHC, spec §2.3): the residual is hc_mult parallel streams
// per token. HcPre collapses them into the sublayer input and derives the post/comb mixing (with
// Sinkhorn-Knopp); HcPost writes the sublayer output back; HcHead is the final collapse.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "io/model_config.h"
#include "model/deepseek_v4/weights.h"

namespace dsinfer::model::deepseek_v4 {

// The residual streams of token ids: X [n, hc, D] = embed[ids] on every stream.
std::vector<float> HcEmbed(const Matrix& embed, const std::vector<int32_t>& ids, int64_t hc,
                           int64_t D);

// X: [n, hc, D] streams. Writes u [n, D], post [n, hc], comb [n, hc, hc] (comb[j][k] row-major).
void HcPre(const HyperConnectionWeights& w, const io::DeepseekV4Config& c, const float* X, int64_t n,
           float* u, float* post, float* comb, ThreadPool* pool);

// The mixing coefficients alone: pre [n, hc] (sigmoid gates + hc_eps), post [n, hc], comb [n, hc,
// hc] (Sinkhorn-projected). HcPre = HcMixes + HcCollapse with the same site's pre; V4.1's
// single-pass mHC collapses with the previous site's pre instead.
void HcMixes(const HyperConnectionWeights& w, const io::DeepseekV4Config& c, const float* X,
             int64_t n, float* pre, float* post, float* comb, ThreadPool* pool);

// u [n, D] = sum_i pre[i] * X[i]   (X: [n, hc, D], pre: [n, hc]).
void HcCollapse(const io::DeepseekV4Config& c, const float* X, const float* pre, int64_t n,
                float* u);

// X <- post[k] * y + sum_j comb[j][k] * X[j]   (y: [n, D]; X: [n, hc, D] updated in place).
void HcPost(const io::DeepseekV4Config& c, const float* y, const float* post, const float* comb,
            int64_t n, float* X);

// out [n, D] = sum_i (sigmoid(m_i * scale + base_i) + eps) * X[i].
void HcHead(const HyperHeadWeights& w, const io::DeepseekV4Config& c, const float* X, int64_t n,
            float* out, ThreadPool* pool);

}  // namespace dsinfer::model::deepseek_v4
