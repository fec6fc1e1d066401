// What this machine offers crl: GPUs, driver and CUDA, nvcc, NCCL, MPI, HDF5, LibTorch (for `crl doctor`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace crl {

struct GpuInfo {
  int index = 0;
  std::string name;
  double memory_gib = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
};

// One component: whether it is usable, its version or detail, and the command that fixes it if not.
struct Component {
  std::string name;
  bool ok = false;
  std::string version;
  std::string detail;
  std::string fix;
};

struct MachineReport {
  std::string host;
  std::vector<GpuInfo> gpus;
  std::vector<Component> components;  // gpu, driver, cuda_runtime, nvcc, nccl, mpi, hdf5, libtorch
  std::string launcher;               // "mpirun", "srun", ... or "" when started by hand
  int rank = -1;
  int size = 0;

  const Component* find(const std::string& name) const;
  nlohmann::json to_json() const;
};

// True when this build has CUDA and at least one CUDA device is visible (cheap; no report).
bool cuda_device_visible();

// Probes without initialising MPI and without keeping a CUDA context busy.
MachineReport probe_machine();

}  // namespace crl
