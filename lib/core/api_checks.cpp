// Error-string helpers behind the MPI and HDF5 check macros.
#include <fmt/format.h>

#include "core/hdf5_check.h"
#include "core/mpi_check.h"

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

namespace {
herr_t collect_entry(unsigned n, const H5E_error2_t* e, void* out) {
  auto* s = static_cast<std::string*>(out);
  if (!s->empty()) s->append("; ");
  s->append(fmt::format("#{} {}(): {}", n, e->func_name ? e->func_name : "?",
                        e->desc ? e->desc : "?"));
  return 0;
}
}  // namespace

std::string hdf5_error_stack() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_entry, &out);
  H5Eclear2(H5E_DEFAULT);
  return out.empty() ? "no HDF5 error stack" : out;
}

void hdf5_silence_default_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

}  // namespace crl
