// Philox4x32-10: a counter-based random number generator (Salmon et al., SC'11). A draw is a pure
// function of (key, counter), so a request keyed by its seed gets the same random numbers for the
// same (position, sample index) whatever batch it runs in and however often it is recomputed.
// Stateless and thread-safe.
#pragma once

#include <array>
#include <cstdint>

namespace dsinfer::sampler {

// Four 32-bit outputs of Philox4x32 with 10 rounds.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// 53 uniform random bits for (seed; position, sample_index, stream).
uint64_t UniformBitsAt(uint64_t seed, int64_t position, uint32_t sample_index, uint32_t stream = 0);
// The same bits as a uniform double in [0, 1): UniformBitsAt * 2^-53.
double UniformAt(uint64_t seed, int64_t position, uint32_t sample_index, uint32_t stream = 0);

}  // namespace dsinfer::sampler
