#include "sampler/philox.h"

namespace dsinfer::sampler {

namespace {

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments

}  // namespace

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

uint64_t UniformBitsAt(uint64_t seed, int64_t position, uint32_t sample_index, uint32_t stream) {
  const uint64_t pos = static_cast<uint64_t>(position);
  const auto r = Philox4x32({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32),
                             sample_index, stream},
                            {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits = (static_cast<uint64_t>(r[0]) << 21) ^ (r[1] >> 11);  // 53 bits
  return bits & ((uint64_t{1} << 53) - 1);
}

double UniformAt(uint64_t seed, int64_t position, uint32_t sample_index, uint32_t stream) {
  return static_cast<double>(UniformBitsAt(seed, position, sample_index, stream)) *
         (1.0 / 9007199254740992.0);
}

}  // namespace dsinfer::sampler
