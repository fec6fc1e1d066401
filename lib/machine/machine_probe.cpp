// Probes each piece crl relies on and says, for each missing one, what fixes it.
#include "machine/machine_probe.h"

#include <fmt/format.h>
#include <hdf5.h>
#include <mpi.h>
#include <torch/headeronly/version.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <regex>

#include "core/process_env.h"
#include "core/subprocess.h"

#ifdef CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif
#ifdef CRL_HAVE_NCCL
#include <nccl.h>
#endif

namespace crl {
namespace {

std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

Component probe_nvcc() {
  Component c{"nvcc"};
  std::string nvcc = find_on_path("nvcc");
  if (nvcc.empty() && find_on_path("/usr/local/cuda/bin/nvcc").size() > 0) nvcc = "/usr/local/cuda/bin/nvcc";
  if (nvcc.empty()) {
    c.fix = "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) or put its bin/ on PATH";
    c.detail = "not found on PATH or in /usr/local/cuda/bin";
    return c;
  }
  const auto r = run_command({nvcc, "--version"}, {.timeout = std::chrono::seconds(30)});
  std::smatch m;
  if (r.ok() && std::regex_search(r.output, m, std::regex("release ([0-9.]+)"))) {
    c.ok = true;
    c.version = m[1];
    c.detail = nvcc;
  } else {
    c.detail = "nvcc --version failed: " + r.output.substr(0, 200);
    c.fix = "reinstall the CUDA toolkit";
  }
  return c;
}

void probe_cuda(MachineReport& report) {
  Component gpu{"gpu"}, driver{"driver"}, runtime{"cuda_runtime"};
#ifdef CRL_HAVE_CUDA
  int rt = 0;
  if (cudaRuntimeGetVersion(&rt) == cudaSuccess) {
    runtime.ok = true;
    runtime.version = cuda_version_string(rt);
  }
  int drv = 0;
  if (cudaDriverGetVersion(&drv) == cudaSuccess && drv > 0) {
    driver.ok = true;
    driver.version = cuda_version_string(drv);
    driver.detail = "highest CUDA version the driver supports";
  } else {
    driver.detail = "no NVIDIA driver loaded";
    driver.fix = "install the NVIDIA driver, or run on a GPU node (srun --gpus=1 crl doctor)";
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    gpu.detail = err != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err)
                                    : "no CUDA device visible";
    gpu.fix = "run on a GPU node (e.g. srun --gpus=1 crl doctor) and check CUDA_VISIBLE_DEVICES";
    cudaGetLastError();
  } else {
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
      report.gpus.push_back({i, p.name, static_cast<double>(p.totalGlobalMem) / (1 << 30), p.major,
                             p.minor, p.multiProcessorCount});
    }
    gpu.ok = !report.gpus.empty();
    gpu.version = fmt::format("{} x {}", report.gpus.size(), report.gpus.empty() ? "" : report.gpus[0].name);
  }
#else
  gpu.detail = driver.detail = runtime.detail = "this build of crl has no CUDA support";
  gpu.fix = driver.fix = runtime.fix =
      "install the CUDA toolkit, then reconfigure crl (tools/setup.sh) so nvcc is found";
#endif
  report.components.push_back(gpu);
  report.components.push_back(driver);
  report.components.push_back(runtime);
}

Component probe_nccl() {
  Component c{"nccl"};
#ifdef CRL_HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess) {
    c.ok = true;
    c.version = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }
#else
  c.detail = "this build of crl has no NCCL (CPU data parallelism uses MPI instead)";
  c.fix = "install NCCL (libnccl-dev) with the CUDA toolkit, then reconfigure crl";
#endif
  return c;
}

Component probe_mpi(MachineReport& report) {
  Component c{"mpi"};
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
    c.ok = true;
    std::string s(lib, static_cast<size_t>(len));
    c.version = s.substr(0, s.find_first_of(",\n"));
  } else {
    c.fix = "apt-get install libopenmpi-dev openmpi-bin";
  }
  const auto place = launch_place();
  report.launcher = place.launcher;
  report.rank = place.rank;
  report.size = place.size;
  c.detail = place.launcher.empty() ? "not started by mpirun or srun"
                                    : fmt::format("started by {}: rank {} of {}", place.launcher,
                                                  place.rank, place.size);
  return c;
}

Component probe_hdf5() {
  Component c{"hdf5"};
  unsigned maj = 0, min = 0, rel = 0;
  if (H5get_libversion(&maj, &min, &rel) >= 0) {
    c.ok = true;
    c.version = fmt::format("{}.{}.{}", maj, min, rel);
  } else {
    c.fix = "apt-get install libhdf5-dev";
  }
  return c;
}

Component probe_libtorch() {
  Component c{"libtorch"};
  c.ok = true;
  c.version = fmt::format("{}.{}.{}", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, TORCH_VERSION_PATCH);
  try {
    const long cudart = at::detail::getCUDAHooks().versionCUDART();
    c.detail = fmt::format("CUDA build (CUDA {}), {}", cuda_version_string(static_cast<int>(cudart)),
                           at::hasCUDA() ? "CUDA usable" : "no CUDA device usable");
  } catch (const std::exception&) {
    c.detail = "CPU build";
  }
  return c;
}

}  // namespace

const Component* MachineReport::find(const std::string& name) const {
  for (const auto& c : components) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

nlohmann::json MachineReport::to_json() const {
  nlohmann::json j;
  j["host"] = host;
  j["gpus"] = nlohmann::json::array();
  for (const auto& g : gpus) {
    j["gpus"].push_back({{"index", g.index},
                         {"name", g.name},
                         {"memory_gib", g.memory_gib},
                         {"compute_capability", fmt::format("{}.{}", g.cc_major, g.cc_minor)},
                         {"multiprocessors", g.multiprocessors}});
  }
  for (const auto& c : components) {
    j["components"][c.name] = {{"ok", c.ok}, {"version", c.version}, {"detail", c.detail}, {"fix", c.fix}};
  }
  j["launch"] = {{"launcher", launcher.empty() ? nlohmann::json(nullptr) : nlohmann::json(launcher)},
                 {"rank", rank},
                 {"size", size}};
  return j;
}

bool cuda_device_visible() {
#ifdef CRL_HAVE_CUDA
  int count = 0;
  const bool visible = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();  // a failed query must not leave a sticky error for the caller
  return visible;
#else
  return false;
#endif
}

MachineReport probe_machine() {
  MachineReport report;
  report.host = hostname();
  probe_cuda(report);
  report.components.push_back(probe_nvcc());
  report.components.push_back(probe_nccl());
  report.components.push_back(probe_mpi(report));
  report.components.push_back(probe_hdf5());
  report.components.push_back(probe_libtorch());
  return report;
}

}  // namespace crl
