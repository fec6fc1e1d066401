// log p(target) per row of a logits matrix, differentiable, without fp32 copies of the logits:
// the op under every SFT and GRPO loss (next_token_log_probs in losses.h).
#pragma once

#include <torch/types.h>

namespace crl::rl {

// logits [N, V] (any floating dtype), targets [N] int64: returns [N] fp32 (fp64 for fp64 logits),
// logits[r, targets[r]] - logsumexp(logits[r, :]), computed in fp32 (fp64). Its gradient w.r.t.
// logits is grad[r] * (onehot(targets[r]) - softmax(logits[r])), in the logits' dtype. On CUDA,
// for fp32/bf16/fp16, two kernels (one read of the logits forward, one read and one write
// backward); otherwise the same formulas with ATen ops (CRL_TOKEN_LOGP_KERNELS=0 forces those on
// CUDA too). A target outside [0, V) gives NaN on the kernels' path and throws on the ATen path.
torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace crl::rl
