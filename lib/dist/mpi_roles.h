// MPI start-up and the split of MPI_COMM_WORLD into trainers (ranks 0..T-1) and evaluators
// (ranks T..), plus the node-local rank that picks a process's GPU.
#pragma once

#include <mpi.h>

namespace crl::dist {

// Initialises MPI (thread level SERIALIZED: autograd hooks may call MPI from the backward thread) unless it already is, and finalises it on destruction
// if this object initialised it. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so CRL_MPI_CHECK sees
// errors instead of MPI aborting. A program started without mpirun runs as a singleton (size 1).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owns_ = false;
  int rank_ = 0, size_ = 1;
};

enum class Role { kTrainer, kEvaluator };

struct MpiRoles {
  Role role = Role::kTrainer;
  int world_rank = 0, world_size = 1;
  int trainer_count = 1;
  MPI_Comm role_comm = MPI_COMM_NULL;  // the ranks of this role; this process's rank in it = role_rank
  int role_rank = 0, role_size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on this node (shared-memory split)

  bool is_trainer() const { return role == Role::kTrainer; }
  // MPI_Comm_free of the communicators this struct owns.
  void release();
};

// Ranks [0, trainer_count) become trainers, the rest evaluators. Throws InputError unless
// 1 <= trainer_count <= world size. The local rank comes from SLURM_LOCALID when Slurm set it,
// else from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
MpiRoles split_roles(MPI_Comm world, int trainer_count);

}  // namespace crl::dist
