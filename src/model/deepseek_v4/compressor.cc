#include "model/deepseek_v4/compressor.h"

#include <cmath>

#include "backend/cpu/ops.h"

namespace dsinfer::model::deepseek_v4 {

namespace cpu = backend::cpu;

void AddPositionBias(const CompressorWeights& w, const int64_t* positions, int64_t n, float* proj) {
  const int64_t width = w.width();
  for (int64_t t = 0; t < n; ++t) {
    const float* ape = w.ape.data() + (positions[t] % w.rate) * width;
    float* gate = proj + t * 2 * width + width;
    for (int64_t i = 0; i < width; ++i) gate[i] += ape[i];
  }
}

void CompressSegment(const CompressorWeights& w, const float* proj, int64_t start_pos,
                     int64_t count, const std::vector<float>& inv_freq, int rope_dim,
                     float norm_eps, const KvFormat& format, bool hadamard, PositionRing* rows,
                     EntryList* entries) {
  const int64_t width = w.width(), dim = w.dim, rate = w.rate;
  auto row = [&](int64_t pos) -> const float* {
    return pos >= start_pos ? proj + (pos - start_pos) * 2 * width : rows->Row(pos);
  };
  const int64_t slots = w.overlap ? 2 * rate : rate;
  std::vector<const float*> value(slots), score(slots);
  std::vector<float> entry(dim), weights(slots), packed(static_cast<size_t>(format.row_floats()));
  for (int64_t p = start_pos; p < start_pos + count; ++p) {
    if ((p + 1) % rate != 0) continue;
    const int64_t win = p / rate;
    int64_t n_slots = 0;
    if (w.overlap) {
      // Slots 0..m-1: the previous window's Ca half (absent for window 0: weight 0).
      if (win > 0) {
        for (int64_t j = 0; j < rate; ++j) {
          const float* r = row(rate * (win - 1) + j);
          value[n_slots] = r;              // kv[0:dim]
          score[n_slots++] = r + width;    // gate[0:dim]
        }
      }
      for (int64_t j = 0; j < rate; ++j) {  // slots m..2m-1: this window's Cb half
        const float* r = row(rate * win + j);
        value[n_slots] = r + dim;
        score[n_slots++] = r + width + dim;
      }
    } else {
      for (int64_t j = 0; j < rate; ++j) {
        const float* r = row(rate * win + j);
        value[n_slots] = r;
        score[n_slots++] = r + width;
      }
    }
    for (int64_t c = 0; c < dim; ++c) {
      for (int64_t s = 0; s < n_slots; ++s) weights[s] = score[s][c];
      cpu::Softmax(weights.data(), n_slots);
      float acc = 0;
      for (int64_t s = 0; s < n_slots; ++s) acc += value[s][c] * weights[s];
      entry[c] = acc;
    }
    cpu::RmsNorm(entry.data(), 1, dim, w.norm.data(), norm_eps);
    cpu::Rope(entry.data() + dim - rope_dim, rope_dim / 2, inv_freq.data(), win * rate, false);
    if (hadamard) HadamardRotate(entry.data(), dim);
    format.Pack(entry.data(), packed.data());
    entries->Append(packed.data());
  }
  for (int64_t t = 0; t < count; ++t) rows->Append(proj + t * 2 * width);
}

}  // namespace dsinfer::model::deepseek_v4
