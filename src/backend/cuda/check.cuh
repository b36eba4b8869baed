// CUDA_CHECK for the .cu/.cc files of backend/cuda: aborts with file:line and the CUDA error string.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CUDA_CHECK(expr)                                                                    \
  do {                                                                                      \
    cudaError_t dsinfer_err_ = (expr);                                                      \
    if (dsinfer_err_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d: CUDA error %s: %s\n", __FILE__, __LINE__, #expr,         \
                   cudaGetErrorString(dsinfer_err_));                                       \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
