// MPI start-up and the split of MPI_COMM_WORLD into trainers (ranks 0..T-1) and evaluators
// (ranks T..), plus the node-local rank and the GPU it picks.
#pragma once

#include <mpi.h>

#include <string>

namespace crl::dist {

// Initialises MPI unless it already is, and finalises it on destruction if this object
// initialised it. Thread level: SERIALIZED at least (autograd hooks may call MPI from the backward
// thread); MPI that provides less makes the constructor throw an Error saying so, whether this
// object initialised it or found it initialised. Sets MPI_ERRORS_RETURN on MPI_COMM_WORLD so
// CRL_MPI_CHECK sees errors instead of MPI aborting. A program started without mpirun runs as a
// singleton (size 1). After mark_mpi_unusable() the destructor calls MPI_Abort instead of
// MPI_Finalize (which would wait for a hung peer), ending every rank of the job.
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

// "MPI_THREAD_SERIALIZED" etc. for a thread level.
std::string thread_level_name(int level);
// Throws Error unless `provided` (MPI_Init_thread's or MPI_Query_thread's) is SERIALIZED or MULTIPLE.
void require_thread_level(int provided);

// Records that a collective timed out or failed: MPI's state is unusable (requests that will never
// complete), so ~MpiSession aborts the job instead of finalising. Safe from any thread.
void mark_mpi_unusable(const std::string& reason);
bool mpi_unusable();
// Ends every rank of the job now with `exit_code` (MPI_Abort on MPI_COMM_WORLD), after
// mark_mpi_unusable(reason): for a peer that died, which the others would wait for forever.
void abort_job(const std::string& reason, int exit_code);

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
// 1 <= trainer_count <= world size. The local rank: local_rank_from(OMPI_COMM_WORLD_LOCAL_RANK,
// SLURM_LOCALID, the rank in MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)).
MpiRoles split_roles(MPI_Comm world, int trainer_count);

// The node-local rank: Open MPI's OMPI_COMM_WORLD_LOCAL_RANK when set (non-null), else Slurm's
// SLURM_LOCALID, else `shared_memory_rank`. Open MPI's comes first because mpirun inside an sbatch
// script passes on the script's own SLURM_LOCALID (0) to every rank it starts. Throws InputError
// naming the variable when a set one is not a non-negative integer.
int local_rank_from(const char* ompi_local_rank, const char* slurm_localid, int shared_memory_rank);

// The GPU a rank uses among the `visible_devices` it sees: local_rank modulo their number. With
// one GPU per rank (`srun --gpus-per-task=1`, or CUDA_VISIBLE_DEVICES set per rank) every rank
// sees one device and takes index 0; with all of a node's GPUs visible, rank i takes GPU i.
// Throws InputError when visible_devices < 1 or local_rank < 0.
int gpu_for_local_rank(int local_rank, int visible_devices);

}  // namespace crl::dist
