#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>

namespace dsinfer::backend::cpu {

void RmsNorm(float* x, int64_t rows, int64_t dim, const float* weight, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(row[i]) * row[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / dim) + eps);
    if (weight) {
      for (int64_t i = 0; i < dim; ++i) row[i] = weight[i] * (row[i] * scale);
    } else {
      for (int64_t i = 0; i < dim; ++i) row[i] = row[i] * scale;
    }
  }
}

void Rope(float* x, int64_t n_pairs, const float* inv_freq, int64_t position, bool inverse) {
  const float pos = static_cast<float>(position);
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float angle = pos * inv_freq[i];
    const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
    float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    if (inverse) s = -s;
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = a * s + b * c;
  }
}

void RopeRows(float* v, int64_t rows, int64_t per_token, int64_t dim, int rope_dim,
              const std::vector<float>& inv_freq, const int64_t* positions, bool inverse) {
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t h = 0; h < per_token; ++h) {
      float* row = v + (t * per_token + h) * dim;
      Rope(row + dim - rope_dim, rope_dim / 2, inv_freq.data(), positions[t], inverse);
    }
  }
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float m = *std::max_element(x, x + n);
  if (m == -INFINITY) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace dsinfer::backend::cpu
