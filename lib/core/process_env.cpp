// Where this process runs: the launcher's variables (its rank, without starting MPI) and its CPUs.
#include "core/process_env.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace crl {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(x) : -1;
}

}  // namespace

std::vector<int> process_thread_ids() {
  std::vector<int> tids;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir)) {
      if (const long tid = std::atol(entry->d_name); tid > 0) tids.push_back(static_cast<int>(tid));
    }
    closedir(dir);
  }
  return tids;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : fallback;
}

int allowed_cpu_count() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int core_share(int processes) { return std::max(1, allowed_cpu_count() / std::max(1, processes)); }

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

LaunchPlace launch_place() {
  LaunchPlace p;
  if (env_int("OMPI_COMM_WORLD_RANK") >= 0) {
    p.launcher = "mpirun";
    p.rank = env_int("OMPI_COMM_WORLD_RANK");
    p.size = env_int("OMPI_COMM_WORLD_SIZE");
    p.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  } else if (env_int("SLURM_PROCID") >= 0 && env_int("SLURM_STEP_ID") >= 0) {
    // SLURM_PROCID alone is also set inside a batch script; a step id means srun started us.
    p.launcher = "srun";
    p.rank = env_int("SLURM_PROCID");
    p.size = env_int("SLURM_NTASKS");
    p.local_rank = env_int("SLURM_LOCALID");
  } else if (env_int("PMIX_RANK") >= 0) {
    p.launcher = "pmix";
    p.rank = env_int("PMIX_RANK");
  } else if (env_int("PMI_RANK") >= 0) {
    p.launcher = "pmi";
    p.rank = env_int("PMI_RANK");
    p.size = env_int("PMI_SIZE");
  }
  if (p.size < 0) p.size = 0;
  return p;
}

}  // namespace crl
