// Data-parallel gradient sums in buckets, overlapped with backward.
//
// Each trainable parameter gets a float32 slot in a flat bucket (buckets filled in reverse
// parameter order, the order backward produces gradients, up to `bucket_bytes` each). A gradient
// hook writes the step's first gradient into its slot and adds later ones (so accumulation is in
// fp32 whatever the model dtype; slots are not zeroed first, only those that got no gradient, when
// their bucket is launched); during the last micro-batch's backward, a bucket whose every parameter has
// reported is all-reduced at once (asynchronously: NCCL on its own stream, MPI_Iallreduce on
// CPU) while backward goes on. finish() launches what is left (parameters that got no gradient
// count as zero) and waits. The result is the SUM over ranks: losses are normalised by the
// global token count, so no division here.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace crl::dist {

struct ReducerOptions {
  size_t bucket_bytes = 64u << 20;  // fp32 bytes per bucket (bench_train's AllReduce sweep: 96% of raw NCCL on 2 H200s)
  bool overlap = true;              // launch buckets from hooks; false: all at finish()
};

// While one exists on this thread, reducer hooks ignore the gradients they see. Activation
// checkpointing's inner autograd::grad() w.r.t. a layer's weights fires their hooks, and the outer
// backward then delivers the same gradients again: only the outer delivery may count.
class IgnoreGradientHooks {
 public:
  IgnoreGradientHooks();
  ~IgnoreGradientHooks();
  static bool active();
};

class GradientReducer {
 public:
  // `params`: the trainable leaf tensors (requires_grad), all on one device. The communicator must
  // outlive the reducer.
  GradientReducer(std::vector<torch::Tensor> params, Communicator& comm, ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts an optimiser step: the fp32 slots' contents become stale (overwritten by the first
  // gradient, or zeroed at launch for a parameter that gets none).
  void begin_step();
  // Call before each micro-batch's backward; `last` marks the one whose backward all-reduces.
  void begin_micro_batch(bool last);
  // Launches unlaunched buckets, waits for all; gradients() then hold the sums over ranks.
  void finish();

  // fp32 gradient per parameter (views into the buckets), in the order of `params`.
  const std::vector<torch::Tensor>& gradients() const { return slots_; }
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  // Makes every rank's parameters equal rank `root`'s (blocking).
  void broadcast_parameters(int root = 0);

  size_t bucket_count() const { return buckets_.size(); }
  // Buckets of the last finish() that were launched from hooks, during backward.
  size_t buckets_launched_during_backward() const { return launched_early_; }
  Communicator& communicator() { return comm_; }

 private:
  struct Bucket {
    torch::Tensor flat;             // fp32
    std::vector<size_t> members;    // indices into params_
    size_t arrived = 0;
    std::unique_ptr<PendingCollective> pending;
    bool launched = false;
  };
  void on_gradient(size_t index, const torch::Tensor& grad);
  void launch(Bucket& bucket);

  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<torch::Tensor> slots_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> arrived_;  // this parameter reported during the last micro-batch
  std::vector<bool> written_;  // its slot holds this step's gradient (else stale: zeroed at launch)
  std::vector<unsigned> hook_handles_;
  bool last_micro_batch_ = true;
  bool in_step_ = false;
  size_t launched_early_ = 0;
};

}  // namespace crl::dist
