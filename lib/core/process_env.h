// Where this process runs: host name and the launcher (mpirun, srun) that started it, from its environment.
#pragma once

#include <string>
#include <vector>

namespace crl {

struct LaunchPlace {
  std::string launcher;  // "mpirun", "srun" or "" when started by hand
  int rank = -1;         // global rank, -1 when not launched as part of a job
  int size = 0;          // number of ranks, 0 when unknown
  int local_rank = -1;   // rank on this node, -1 when unknown
};

// Reads Open MPI, PMIx and Slurm variables; does not initialise MPI.
LaunchPlace launch_place();

std::string hostname();

// The CPUs this process may run on: its affinity mask (under Slurm, the job's cpuset), at least one.
int allowed_cpu_count();

// This process's share of those CPUs when `processes` processes split them evenly (at least one): a
// rank's intra-op threads and compile jobs, so that the ranks of a node do not contend.
int core_share(int processes);

// The ids of this process's threads now (/proc/self/task); empty when that cannot be read.
std::vector<int> process_thread_ids();

// Value of an environment variable, or `fallback` when unset.
std::string env_or(const char* name, const std::string& fallback);

}  // namespace crl
