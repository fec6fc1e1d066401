// MPI's error string behind CRL_MPI_CHECK (see mpi_check.h).
#include "dist/mpi_check.h"

#include <fmt/format.h>

namespace crl {

std::string mpi_error_string(int code) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) return fmt::format("MPI error code {} (MPI not initialised)", code);
  char buf[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

}  // namespace crl
