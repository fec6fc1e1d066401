// CRL_NCCL_CHECK(call): throws crl::ApiError naming the NCCL call, its last error, file, line, rank and host.
#pragma once

#include <nccl.h>

#include <string>

#include "core/error.h"

#define CRL_NCCL_CHECK(call)                                                              \
  do {                                                                                    \
    const ncclResult_t crl_nccl_res_ = (call);                                            \
    if (crl_nccl_res_ != ncclSuccess && crl_nccl_res_ != ncclInProgress) {                \
      ::crl::throw_api_error("NCCL", #call,                                               \
                             std::string(ncclGetErrorString(crl_nccl_res_)) + " (" +     \
                                 ncclGetLastError(nullptr) + ")",                         \
                             __FILE__, __LINE__);                                         \
    }                                                                                     \
  } while (0)
