// The names of the visible GPUs (see gpu_names.h).
#include "machine/gpu_names.h"

#if CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crl {

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
