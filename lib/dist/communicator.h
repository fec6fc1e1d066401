// The trainers' communicator: sum all-reduce and broadcast of tensors, asynchronous, with one
// interface over two backends. On CUDA tensors it is NCCL (one communicator bootstrapped from MPI
// by broadcasting an ncclUniqueId, collectives on a dedicated stream ordered after the caller's
// current stream); on CPU tensors it is MPI (MPI_Iallreduce / MPI_Ibcast). Gradient code uses the
// same calls either way, so CI exercises the GPU code path's logic on CPU ranks.
#pragma once

#include <mpi.h>
#include <torch/types.h>

#include <memory>
#include <string>

namespace crl::dist {

// A collective in flight; wait() makes its result visible to the caller's current stream (GPU)
// or to the CPU (MPI). Destroying an unwaited handle waits.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "nccl", "mpi" or "local"
  // In-place sum over ranks. `tensor` must be contiguous, float32/float64 (MPI) or
  // float32/bfloat16/float16 (NCCL), on this communicator's device, and stay alive until wait().
  virtual std::unique_ptr<PendingCollective> all_reduce_sum(torch::Tensor& tensor) = 0;
  // In-place broadcast from `root`.
  virtual std::unique_ptr<PendingCollective> broadcast(torch::Tensor& tensor, int root) = 0;
  // Sum of one number over ranks (blocking, through MPI): token counts, metrics.
  virtual double all_reduce_scalar(double value) = 0;
};

// A communicator over `comm` (duplicated; the caller keeps its own) for tensors on `device`:
// NCCL when device is CUDA (throws ApiError if this build has no NCCL), MPI otherwise.
// Collective across the ranks of `comm`.
std::unique_ptr<Communicator> make_communicator(MPI_Comm comm, torch::Device device);

// One process, no MPI: collectives are no-ops. For single-process training and tests.
std::unique_ptr<Communicator> make_local_communicator();

}  // namespace crl::dist
