// Elementwise and row-wise fp32 ops of the CPU backend (the reference every GPU op is tested
// against). All functions are pure: they write only their outputs and are deterministic.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer::backend::cpu {

// x[rows, dim] <- x * rsqrt(mean(x^2) + eps) * weight (weight may be null: unweighted).
void RmsNorm(float* x, int64_t rows, int64_t dim, const float* weight, float eps);

// Interleaved RoPE on x[0 .. 2*n_pairs): pair i = (x[2i], x[2i+1]) rotated by angle
// position * inv_freq[i] (inverse: by the negative angle). The angle is formed in fp32 as the
// reference does (fp32(pos) * inv_freq), then cos/sin are evaluated in double and rounded.
void Rope(float* x, int64_t n_pairs, const float* inv_freq, int64_t position, bool inverse);
// Rope on the trailing `rope_dim` channels of each of the `per_token` vectors of `dim` floats of
// `rows` rows of v, at each row's position.
void RopeRows(float* v, int64_t rows, int64_t per_token, int64_t dim, int rope_dim,
              const std::vector<float>& inv_freq, const int64_t* positions, bool inverse);

// In-place numerically stable softmax over n values.
void Softmax(float* x, int64_t n);

float Silu(float x);
float Sigmoid(float x);
// softplus with PyTorch's defaults (beta 1, threshold 20: x > 20 returns x).
float Softplus(float x);

}  // namespace dsinfer::backend::cpu
