// CRL_H5_CHECK(call): throws crl::ApiError when an HDF5 call returns a negative id or status,
// carrying HDF5's own error stack (which HDF5 would otherwise print to stderr).
#pragma once

#include <hdf5.h>

#include <string>

#include "core/error.h"

namespace crl {
// The current HDF5 error stack as one line per entry; clears the stack.
std::string hdf5_error_stack();
// Stops HDF5 printing its error stack to stderr; crl reports it in exceptions instead.
void hdf5_silence_default_printing();
}  // namespace crl

#define CRL_H5_CHECK(call)                                                                  \
  ([&]() {                                                                                  \
    const auto crl_h5_rc_ = (call);                                                         \
    if (crl_h5_rc_ < 0) {                                                                   \
      ::crl::throw_api_error("HDF5", #call, ::crl::hdf5_error_stack(), __FILE__, __LINE__); \
    }                                                                                       \
    return crl_h5_rc_;                                                                      \
  }())
