// AdamW over fp32 master weights: the model may compute in bf16, while the optimiser keeps an
// fp32 copy of every trainable parameter plus fp32 moments, updates those (PyTorch's fused AdamW
// kernel, CPU and CUDA), and writes the rounded result back into the model's parameters.
// Gradients come in as fp32 tensors (the GradientReducer's buckets), clipped by global norm first.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "policy/optimizer_state.h"

namespace crl::rl {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

class MasterAdamW : public policy::OptimizerState {
 public:
  // `params`: trainable parameters by name (their dtype is the compute dtype).
  MasterAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options);

  // Global L2 norm of `grads` (before clipping), as an fp32 scalar on their device; when max_norm > 0
  // and the norm exceeds it, scales the grads in place by max_norm / (norm + 1e-6) as
  // torch.nn.utils.clip_grad_norm_. Like it, without waiting for the GPU: the factor is clamped to
  // 1 on the device, and multiplying by 1 changes nothing.
  static torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm);

  // One AdamW step with rate `lr` from fp32 `grads` (one per parameter, in order), unless a
  // gradient holds a NaN or an Inf: then the step is skipped on the device, leaving masters,
  // moments, step counts and the model's parameters bitwise as they were (the fused kernel's
  // found_inf, as torch's GradScaler uses it). `found_inf`: an fp32 scalar on the gradients' device,
  // 1 to skip; undefined: step() finds it itself (torch's _amp_foreach_non_finite_check_and_unscale_
  // with scale 1, one more pass over the gradients). Returns the flag without waiting for it.
  torch::Tensor step(const std::vector<torch::Tensor>& grads, double lr, torch::Tensor found_inf = {});

  // The found_inf flag for gradients whose global L2 norm is `grad_norm` (clip_grad_norm's result):
  // 1 when the norm is not finite, i.e. when a gradient holds a NaN or an Inf (or their squares
  // overflow fp32, beyond 1.8e19, which no healthy step reaches). Costs no pass over the gradients.
  static torch::Tensor non_finite(const torch::Tensor& grad_norm);

  // Optimiser steps applied (skipped ones not counted). Reads the outcome of steps still unsettled
  // from the device (a wait) unless settle_step() handed it in.
  int64_t steps() const;
  // The outcome of the one step() since the last settlement, read by the caller together with its
  // other figures, so that steps() need not read it. Throws Error unless exactly one is unsettled.
  void settle_step(bool skipped);
  const std::vector<std::pair<std::string, torch::Tensor>>& parameters() const { return params_; }

  // State as named tensors ("<param>.master", "<param>.exp_avg", "<param>.exp_avg_sq", "step"),
  // and back; load validates names and shapes, naming `origin` in errors.
  std::vector<std::pair<std::string, torch::Tensor>> state_tensors() const override;
  void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) override;

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  AdamWOptions options_;
  std::vector<torch::Tensor> masters_, exp_avg_, exp_avg_sq_, step_counts_;
  std::vector<torch::Tensor> model_tensors_;  // params_' tensors, detached: the copy-back's targets
  mutable int64_t steps_ = 0;                 // applied steps, as far as the host knows
  mutable torch::Tensor unsettled_applied_;   // fp32 device count of applied steps not in steps_ yet
  mutable int64_t unsettled_steps_ = 0;       // step() calls since the last settlement
};

}  // namespace crl::rl
