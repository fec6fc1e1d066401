// The trainers' communicator: sum all-reduce and broadcast of tensors, asynchronous, with one
// interface over two backends. On CUDA tensors it is NCCL (one communicator bootstrapped from MPI
// by broadcasting an ncclUniqueId, collectives on a dedicated stream ordered after the caller's
// current stream); on CPU tensors it is MPI (MPI_Iallreduce / MPI_Ibcast). Gradient code uses the
// same calls either way, so CI exercises the GPU code path's logic on CPU ranks.
//
// Every wait is bounded: a collective that has not finished after CommunicatorOptions'
// collective_timeout (a peer died, hangs, or never reached it) fails with CollectiveError naming
// the collective, this rank and its peers. On MPI, waits poll MPI_Test against the deadline; on
// NCCL, whose waits are on the GPU, a watchdog thread polls each collective's completion event and
// ncclCommGetAsyncError, and on a timeout or an asynchronous error aborts the communicator
// (ncclCommAbort, which also ends the collective's kernels, so the GPU stream drains) and makes
// the next call on the communicator throw. Either way mark_mpi_unusable() is called, so the
// process's MpiSession ends the whole job with MPI_Abort instead of waiting in MPI_Finalize.
#pragma once

#include <mpi.h>
#include <torch/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/error.h"

namespace crl::dist {

// A collective that timed out or failed asynchronously; the communicator is unusable afterwards.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

struct CommunicatorOptions {
  // How long a collective may take, from its launch (NCCL) or its wait (MPI) to its completion.
  // It must exceed the longest legitimate skew between ranks (rank 0 writing a checkpoint while
  // the others wait in the next collective); torch's default for NCCL is 10 minutes too.
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(10)};
  void validate() const;  // InputError unless collective_timeout > 0
};

// A collective in flight; wait() makes its result visible to the caller's current stream (GPU)
// or to the CPU (MPI), or throws CollectiveError (see above). Destroying an unwaited handle waits
// (and logs instead of throwing). A handle must not outlive its communicator.
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
  // Sum of one number over ranks (blocking, through MPI, bounded by the timeout): token counts, metrics.
  virtual double all_reduce_scalar(double value) = 0;
};

// A communicator over `comm` (duplicated; the caller keeps its own) for tensors on `device`:
// NCCL when device is CUDA (throws ApiError if this build has no NCCL), MPI otherwise.
// Collective across the ranks of `comm` (bounded by the timeout, but for NCCL's own set-up, which
// starts once every rank has arrived).
std::unique_ptr<Communicator> make_communicator(MPI_Comm comm, torch::Device device, CommunicatorOptions options = {});

// "1" or "0, 2-5": the ranks of a communicator of `size` other than `rank`, for messages.
std::string peer_ranks(int rank, int size);

// One process, no MPI: collectives are no-ops. For single-process training and tests.
std::unique_ptr<Communicator> make_local_communicator();

}  // namespace crl::dist
