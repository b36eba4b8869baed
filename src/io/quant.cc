#include "io/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dsinfer::io {

namespace {

float ScaleValue(const TensorView& scale, int64_t index) {
  if (scale.dtype == DType::kF8E8M0) return E8M0ToFloat(scale.data[index]);
  float f;
  std::memcpy(&f, scale.data + index * 4, 4);
  return f;
}

std::string Describe(const TensorView& t) {
  return "tensor '" + t.name + "' (" + std::string(DTypeName(t.dtype)) + t.ShapeString() + ")";
}

}  // namespace

StatusOr<std::vector<float>> DequantizeToF32(const TensorView& weight, const TensorView* scale,
                                             const std::vector<int64_t>& shape, int fp8_block) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<float> out(static_cast<size_t>(numel));
  switch (weight.dtype) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16: {
      if (weight.numel() != numel) {
        return DataLoss(Describe(weight) + " does not match the expected " + std::to_string(numel) +
                        " elements");
      }
      if (scale) return DataLoss(Describe(weight) + " is not quantized but has a scale tensor");
      if (weight.dtype == DType::kF32) {
        std::memcpy(out.data(), weight.data, static_cast<size_t>(numel) * 4);
      } else {
        const bool bf16 = weight.dtype == DType::kBF16;
        for (int64_t i = 0; i < numel; ++i) {
          uint16_t v;
          std::memcpy(&v, weight.data + i * 2, 2);
          out[i] = bf16 ? Bf16ToFloat(v) : F16ToFloat(v);
        }
      }
      return out;
    }
    case DType::kF8E4M3: {
      if (shape.size() != 2 || weight.shape != shape) {
        return DataLoss(Describe(weight) + ": FP8 weights must be 2-D with the expected shape");
      }
      if (!scale) return DataLoss(Describe(weight) + " is FP8 but has no scale tensor");
      const int64_t rows = shape[0], cols = shape[1], b = fp8_block;
      const std::vector<int64_t> sshape = {(rows + b - 1) / b, (cols + b - 1) / b};
      if (scale->shape != sshape ||
          (scale->dtype != DType::kF8E8M0 && scale->dtype != DType::kF32)) {
        return DataLoss("scale of " + Describe(weight) + " is " + Describe(*scale) +
                        ", expected F8_E8M0 or F32 [" + std::to_string(sshape[0]) + ", " +
                        std::to_string(sshape[1]) + "]");
      }
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t jb = 0; jb < sshape[1]; ++jb) {
          const float s = ScaleValue(*scale, (i / b) * sshape[1] + jb);
          const int64_t j1 = std::min(cols, (jb + 1) * b);
          for (int64_t j = jb * b; j < j1; ++j)
            out[i * cols + j] = E4M3ToFloat(weight.data[i * cols + j]) * s;
        }
      }
      return out;
    }
    case DType::kI8:
    case DType::kU8: {
      if (shape.size() != 2 || shape[1] % 32 != 0) {
        return DataLoss(Describe(weight) + ": packed FP4 needs a 2-D shape with in % 32 == 0");
      }
      const int64_t rows = shape[0], cols = shape[1];
      if (weight.shape != std::vector<int64_t>{rows, cols / 2}) {
        return DataLoss(Describe(weight) + ": packed FP4 expected [" + std::to_string(rows) + ", " +
                        std::to_string(cols / 2) + "]");
      }
      if (!scale || scale->dtype != DType::kF8E8M0 ||
          scale->shape != std::vector<int64_t>{rows, cols / 32}) {
        return DataLoss(Describe(weight) +
                        " is packed FP4 but its scale is missing or not F8_E8M0 [" +
                        std::to_string(rows) + ", " + std::to_string(cols / 32) + "]");
      }
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t jb = 0; jb < cols / 32; ++jb) {
          const float s = E8M0ToFloat(scale->data[i * (cols / 32) + jb]);
          const uint8_t* bytes = weight.data + i * (cols / 2) + jb * 16;
          float* o = out.data() + i * cols + jb * 32;
          for (int k = 0; k < 16; ++k) {
            o[2 * k] = E2M1ToFloat(bytes[k] & 0xf) * s;
            o[2 * k + 1] = E2M1ToFloat(bytes[k] >> 4) * s;
          }
        }
      }
      return out;
    }
    case DType::kF8E8M0:
    case DType::kI64:
    case DType::kI32:
      break;
  }
  return DataLoss(Describe(weight) + " has a dtype that cannot hold weights");
}

StatusOr<MmaOperand> QuantizedToMma(const TensorView& weight, const TensorView* scale,
                                    const std::vector<int64_t>& shape, int fp8_block) {
  const bool fp8 = weight.dtype == DType::kF8E4M3;
  if (!fp8 && weight.dtype != DType::kI8 && weight.dtype != DType::kU8) {
    return InvalidArgument(Describe(weight) + " is not FP8 or FP4: no FP8-instruction operand");
  }
  if (shape.size() != 2 || shape[1] % 32 != 0) {
    return InvalidArgument(Describe(weight) +
                           ": FP8-instruction operands need [out, in % 32 == 0]");
  }
  MmaOperand o;
  o.rows = shape[0];
  o.cols = shape[1];
  o.bc = fp8 ? fp8_block : 128;
  const int64_t nb = (o.cols + o.bc - 1) / o.bc;
  // The layouts DequantizeToF32 checks in full (the loader calls it first); here only what the
  // reads below rely on.
  const int64_t groups = o.cols / 32;  // FP4's scale groups of a row
  const int64_t sb = fp8 ? (o.rows + fp8_block - 1) / fp8_block * nb : o.rows * groups;
  const size_t scale_bytes =
      static_cast<size_t>(sb) * (scale && scale->dtype == DType::kF32 ? 4 : 1);
  if (weight.nbytes != static_cast<size_t>(fp8 ? o.rows * o.cols : o.rows * o.cols / 2) ||
      scale == nullptr || scale->nbytes != scale_bytes ||
      (scale->dtype != DType::kF8E8M0 && !(fp8 && scale->dtype == DType::kF32))) {
    return DataLoss(Describe(weight) + " or its scale does not have the expected layout");
  }
  o.e4m3.resize(static_cast<size_t>(o.rows * o.cols));
  o.scale.resize(static_cast<size_t>(o.rows * nb));
  for (int64_t i = 0; i < o.rows; ++i) {
    if (fp8) {
      for (int64_t jb = 0; jb < nb; ++jb)
        o.scale[i * nb + jb] = ScaleValue(*scale, (i / fp8_block) * nb + jb);
      for (int64_t j = 0; j < o.cols; ++j) o.e4m3[i * o.cols + j] = weight.data[i * o.cols + j];
      continue;
    }
    const uint8_t* const g = scale->data + i * groups;  // the row's group bytes
    for (int64_t jb = 0; jb < nb; ++jb) {
      const int64_t g0 = jb * 4, g1 = std::min(groups, g0 + 4);
      const uint8_t e_max = *std::max_element(g + g0, g + g1);
      o.scale[i * nb + jb] = E8M0ToFloat(e_max);
      for (int64_t j = g0 * 32; j < g1 * 32; ++j) {
        const uint8_t byte = weight.data[i * (o.cols / 2) + j / 2];
        o.e4m3[i * o.cols + j] =
            E2M1ToE4M3Shifted(j % 2 ? byte >> 4 : byte & 0xf, e_max - g[j / 32]);
      }
    }
  }
  return o;
}

QuantizedTensor QuantizeFp8Blocks(const std::vector<float>& w, int64_t out, int64_t in, int block) {
  QuantizedTensor q;
  const int64_t br = (out + block - 1) / block, bc = (in + block - 1) / block;
  q.data.resize(static_cast<size_t>(out * in));
  q.scale.resize(static_cast<size_t>(br * bc));
  q.data_shape = {out, in};
  q.scale_shape = {br, bc};
  for (int64_t bi = 0; bi < br; ++bi) {
    for (int64_t bj = 0; bj < bc; ++bj) {
      float amax = 0;
      for (int64_t i = bi * block; i < std::min(out, (bi + 1) * block); ++i)
        for (int64_t j = bj * block; j < std::min(in, (bj + 1) * block); ++j)
          amax = std::max(amax, std::fabs(w[i * in + j]));
      const uint8_t s = Ue8m0ScaleFor(amax, 448.0f, 1e-4f);
      q.scale[bi * bc + bj] = s;
      const float inv = 1.0f / E8M0ToFloat(s);
      for (int64_t i = bi * block; i < std::min(out, (bi + 1) * block); ++i)
        for (int64_t j = bj * block; j < std::min(in, (bj + 1) * block); ++j)
          q.data[i * in + j] = FloatToE4M3(w[i * in + j] * inv);
    }
  }
  return q;
}

QuantizedTensor QuantizeFp4(const std::vector<float>& w, int64_t out, int64_t in) {
  QuantizedTensor q;
  q.data.assign(static_cast<size_t>(out * in / 2), 0);
  q.scale.resize(static_cast<size_t>(out * in / 32));
  q.data_shape = {out, in / 2};
  q.scale_shape = {out, in / 32};
  for (int64_t i = 0; i < out; ++i) {
    for (int64_t b = 0; b < in / 32; ++b) {
      float amax = 0;
      for (int64_t j = b * 32; j < (b + 1) * 32; ++j)
        amax = std::max(amax, std::fabs(w[i * in + j]));
      const uint8_t s = Ue8m0ScaleFor(amax, 6.0f, 6.0f * std::ldexp(1.0f, -126));
      q.scale[i * (in / 32) + b] = s;
      const float inv = 1.0f / E8M0ToFloat(s);
      for (int64_t j = b * 32; j < (b + 1) * 32; ++j) {
        const uint8_t code = FloatToE2M1(w[i * in + j] * inv);
        q.data[(i * in + j) / 2] |= static_cast<uint8_t>((j % 2 == 0) ? code : (code << 4));
      }
    }
  }
  return q;
}

}  // namespace dsinfer::io
