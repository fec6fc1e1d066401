// Where a result came from (see provenance.h).
#include "core/provenance.h"

#include <chrono>

#include "core/error.h"
#include "core/subprocess.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl {

std::string git_commit() {
  try {
    const CommandResult r = run_command({"git", "-C", CRL_SOURCE_DIR, "rev-parse", "HEAD"}, {.timeout = std::chrono::seconds(10)});
    if (r.ok()) return r.output.substr(0, r.output.find_first_of("\r\n"));
  } catch (const Error&) {
  }
  return "unknown";
}

std::vector<std::string> visible_gpu_names() {
  std::vector<std::string> names;
#if CRL_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return names;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    names.push_back(cudaGetDeviceProperties(&prop, i) == cudaSuccess ? prop.name : "cuda (unknown)");
  }
#endif
  return names;
}

std::string device_name(const std::string& backend, int index) {
  if (backend != "cuda") return "cpu";
  const auto names = visible_gpu_names();
  if (names.empty()) return "cuda (unknown)";
  return names[static_cast<size_t>(index) % names.size()];
}

}  // namespace crl
