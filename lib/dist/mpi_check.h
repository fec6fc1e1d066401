// CRL_MPI_CHECK(call): throws crl::ApiError naming the MPI call and MPI's error string.
// Communicators that use it must have MPI_ERRORS_RETURN set (crl's dist module does).
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.h"

namespace crl {
std::string mpi_error_string(int code);
}

#define CRL_MPI_CHECK(call)                                                                  \
  do {                                                                                       \
    const int crl_mpi_rc_ = (call);                                                          \
    if (crl_mpi_rc_ != MPI_SUCCESS) {                                                        \
      ::crl::throw_api_error("MPI", #call, ::crl::mpi_error_string(crl_mpi_rc_), __FILE__,  \
                             __LINE__);                                                      \
    }                                                                                        \
  } while (0)
