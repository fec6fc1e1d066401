// One optimiser step of the policy: forward (optionally with activation checkpointing per decoder
// layer), a caller-given loss, backward into the data-parallel gradient reducer, gradient-norm
// clipping, AdamW on fp32 masters with the scheduled rate. SFT and GRPO differ only in the loss.
//
// The loss function returns the SUM of per-token losses of one micro-batch; the trainer divides
// by the number of loss tokens over all micro-batches and all ranks (token-level aggregation), so
// 2 ranks with batch B give the same update as 1 rank with batch 2B.
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "dist/gradient_reducer.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "rl/lr_schedule.h"
#include "rl/optimizer.h"

namespace crl::rl {

struct TrainerOptions {
  LrSchedule schedule;
  AdamWOptions adamw;
  double max_grad_norm = 1.0;            // <= 0: no clipping (the norm is still reported)
  bool activation_checkpointing = false;  // recompute each decoder layer's forward in backward
  dist::ReducerOptions reducer;
};

// A micro-batch: input_ids [B, S] int64; padding_mask [B, S] (1 = real token; undefined: none);
// loss_mask [B, S] (1 = the token is a loss target; column 0 never is). A padding mask with only
// right padding is dropped (exact for every real token), so such batches get the fused causal
// attention; left padding keeps the masked path. Pack sequences to the left for speed.
struct MicroBatch {
  torch::Tensor input_ids, padding_mask, loss_mask;
};

// Sum of per-token losses of micro-batch `index`, from its logits [B, S, V].
using LossSumFn = std::function<torch::Tensor(const torch::Tensor& logits, size_t index)>;

struct StepStats {
  double loss = 0;          // mean per loss token over all ranks
  int64_t tokens = 0;       // loss tokens over all ranks
  double grad_norm = 0;     // before clipping
  double lr = 0;
  int64_t step = 0;         // optimiser steps applied after this one
  bool skipped = false;     // a gradient held a NaN or Inf: the optimiser left everything as it was
};

// Logits [B, S, V] of a full causal pass, each decoder layer run inside a checkpoint: its
// activations are dropped after forward and recomputed in backward. Matches model->forward
// (padding mask, positions) exactly.
torch::Tensor forward_with_checkpointing(policy::CausalLm& model, const torch::Tensor& input_ids,
                                         const torch::Tensor& padding_mask);

class Trainer {
 public:
  // Full fine-tuning when `lora` is null (every model parameter trains), else only the adapters
  // (attached to the model by `lora` for its whole life, so generation between steps samples the
  // trained adapters). Broadcasts rank 0's trainable parameters to all ranks. `comm` and `lora`
  // must outlive it.
  Trainer(policy::CausalLm model, TrainerOptions options, dist::Communicator& comm, policy::LoraAdapters* lora = nullptr);

  // One optimiser step over `micro_batches`. A step whose (all-reduced) gradients hold a NaN or Inf
  // is skipped on the device, on every rank alike, and reported in StepStats::skipped.
  StepStats step(const std::vector<MicroBatch>& micro_batches, const LossSumFn& loss_sum);
  // Logits with grad enabled, as step() computes them (checkpointing as configured).
  torch::Tensor forward(const MicroBatch& batch);

  MasterAdamW& optimizer() { return *optimizer_; }
  dist::GradientReducer& reducer() { return *reducer_; }
  const TrainerOptions& options() const { return options_; }
  policy::CausalLm& model() { return model_; }
  policy::LoraAdapters* lora() { return lora_; }

 private:
  // forward() once the padding decision is made (keep_padding false: the mask is not used).
  torch::Tensor forward(const MicroBatch& batch, bool keep_padding);

  policy::CausalLm model_;
  TrainerOptions options_;
  dist::Communicator& comm_;
  policy::LoraAdapters* lora_;
  std::unique_ptr<MasterAdamW> optimizer_;
  std::unique_ptr<dist::GradientReducer> reducer_;
};

}  // namespace crl::rl
