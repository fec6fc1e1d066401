// SFT and GRPO losses over per-token log-probabilities, as sums with token counts so that data
// parallel ranks can divide by the global number of loss tokens (token-level aggregation).
//
// Conventions: logits [B, S, V] come from a causal pass over input_ids [B, S]; column t predicts
// token t+1. `loss_mask` [B, S] marks the tokens that are targets (completion tokens: 1, prompt
// and padding: 0); its column 0 is never a target. Every loss returns the SUM over target tokens
// and the number of target tokens; mean = sum / tokens, or sum / (tokens over all ranks).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <optional>

namespace crl::rl {

// A loss as a differentiable sum over target tokens, plus what was counted. The counts are fp32
// scalar tensors on the loss's device, not numbers: reading one (.item()) waits for the GPU, and a
// training step that waited mid-way would leave the GPU idle while the CPU catches up.
struct LossSum {
  torch::Tensor sum;             // fp32 scalar with autograd history
  torch::Tensor tokens;          // target tokens in the sum
  torch::Tensor clipped_tokens;  // GRPO: tokens whose ratio was clipped (the min took the clipped side)
  torch::Tensor kl_sum;          // GRPO: sum of the k3 KL estimate over target tokens (0 without a reference)
};

// log p(input_ids[:, t+1] | prefix) for t = 0..S-2, placed at column t+1: [B, S] fp32, column 0
// is zero. Computed in fp32 whatever the logits' dtype, by token_log_probs (no fp32 copy of the
// logits is made or kept for backward).
torch::Tensor next_token_log_probs(const torch::Tensor& logits, const torch::Tensor& input_ids);

// Cross-entropy on the masked (completion) tokens: sum over targets of -log p(token).
LossSum sft_loss(const torch::Tensor& logits, const torch::Tensor& input_ids, const torch::Tensor& loss_mask);

// Sum over target tokens of the policy's entropy (nats) at the position that predicts each of them,
// -sum_v p(v) log p(v) from the logits [B, S, V] as they are (no temperature), with the count of
// target tokens, both fp32 scalars without autograd history (telemetry: what the update trained
// on). Computed in fp32 over chunks of `chunk_rows` positions, so no fp32 copy of all the logits
// is made, and without reading anything back from the device (every position is computed and the
// mask weighs it; selecting the masked rows would wait for the GPU to count them).
struct EntropySum {
  torch::Tensor sum, tokens;
};
EntropySum token_entropy_sum(const torch::Tensor& logits, const torch::Tensor& loss_mask, int64_t chunk_rows = 256);

// Group-normalised advantages: rewards [N] in consecutive groups of `group_size` completions of
// one prompt; (r - mean_group) / (std_group + eps), std with Bessel's correction (torch.std, as
// TRL's GRPO). A group of equal rewards gets advantage 0. Throws InputError unless N is a
// positive multiple of group_size and group_size >= 2.
torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, double eps = 1e-4);

struct GrpoOptions {
  double clip_epsilon_low = 0.2;   // ratio floor 1 - eps_low
  double clip_epsilon_high = 0.28; // ratio ceiling 1 + eps_high (DAPO's clip-higher)
  double kl_beta = 0.0;            // weight of the k3 KL penalty to the reference; 0 = off
};

// GRPO's clipped surrogate per target token:
//   ratio = exp(logp - old_logp)
//   loss_t = -min(ratio * A, clamp(ratio, 1 - eps_low, 1 + eps_high) * A)
//            + beta * (exp(ref_logp - logp) - (ref_logp - logp) - 1)      (k3 estimator)
// summed over target tokens. logp [B, S] (with autograd), old_logp and ref_logp [B, S] (no grad;
// ref only when kl_beta > 0), advantages [B], loss_mask [B, S]; all shapes are checked.
LossSum grpo_loss(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& advantages,
                  const torch::Tensor& loss_mask, const GrpoOptions& options,
                  const std::optional<torch::Tensor>& ref_logp = std::nullopt);

}  // namespace crl::rl
