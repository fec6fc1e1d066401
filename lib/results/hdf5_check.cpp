// HDF5's error stack behind CRL_H5_CHECK (see hdf5_check.h).
#include "results/hdf5_check.h"

#include <fmt/format.h>

namespace crl {

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
