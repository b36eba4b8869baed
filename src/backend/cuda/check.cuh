// CUDA_CHECK for the .cu/.cc files of backend/cuda: aborts with file:line and the CUDA error string.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "base/check.h"
#include "base/status.h"

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

// A launcher's own check of its params (STYLE.md: our bug if it fails — the model validates the
// shapes a config can cause when it is built, through the same Validate()).
#define DSINFER_CHECK_PARAMS(params)                                                 \
  do {                                                                               \
    const ::dsinfer::Status dsinfer_st_ = (params).Validate();                       \
    if (!dsinfer_st_.ok()) {                                                         \
      std::fprintf(stderr, "%s:%d: invalid kernel params: %s\n", __FILE__, __LINE__, \
                   dsinfer_st_.message().c_str());                                   \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
