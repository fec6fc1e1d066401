// CRL_CUDA_CHECK(call): throws crl::ApiError naming the CUDA call, file, line, rank and host.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

#define CRL_CUDA_CHECK(call)                                                             \
  do {                                                                                   \
    const cudaError_t crl_cuda_err_ = (call);                                            \
    if (crl_cuda_err_ != cudaSuccess) {                                                  \
      ::crl::throw_api_error("CUDA", #call,                                              \
                             std::string(cudaGetErrorName(crl_cuda_err_)) + ": " +       \
                                 cudaGetErrorString(crl_cuda_err_),                      \
                             __FILE__, __LINE__);                                        \
    }                                                                                    \
  } while (0)
