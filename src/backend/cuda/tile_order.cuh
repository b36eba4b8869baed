// The order persistent GEMM blocks walk their output tiles in (qgemm_ws_sm90.cu,
// fp8mma_linear_sm90.cu). Internal to backend/cuda.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// Tile t -> (row block, token tile): groups of group_rows row blocks, token tiles outer within a
// group, so the blocks in flight share a few weight row blocks and a stretch of tokens.
__device__ __forceinline__ void TileCoords(int64_t t, int64_t row_blocks, int64_t token_tiles,
                                           int64_t group_rows, int64_t* rb, int64_t* tt) {
  const int64_t per_group = group_rows * token_tiles;
  const int64_t first = (t / per_group) * group_rows, r = t % per_group;
  const int64_t size = row_blocks - first < group_rows ? row_blocks - first : group_rows;
  *tt = r / size;
  *rb = first + r % size;
}

}  // namespace dsinfer::backend::cuda
