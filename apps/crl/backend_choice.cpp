// choose_backend (backend_choice.h).
#include "apps/crl/backend_choice.h"

#include "core/error.h"
#include "machine/machine_probe.h"

namespace crl::cli {

Backend choose_backend(const std::string& option) {
  const bool gpu = cuda_device_visible();
  if (option.empty()) return gpu ? Backend::cuda : Backend::cpu;
  const Backend backend = parse_backend(option);
  if (backend == Backend::cuda && !gpu) {
    throw InputError(
        "--backend cuda: no CUDA GPU is visible to this process (none on this machine, CUDA_VISIBLE_DEVICES hides them, "
        "or this crl was built without CUDA); give --backend cpu, or run on a GPU machine (`crl doctor` says what it sees)");
  }
  return backend;
}

}  // namespace crl::cli
