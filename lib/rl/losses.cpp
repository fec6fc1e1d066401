// SFT and GRPO losses (see losses.h for the conventions).
#include "rl/losses.h"

#include <torch/torch.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "rl/token_log_probs.h"

namespace crl::rl {
namespace {

std::string shape_text(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string shape_of(const torch::Tensor& t) { return t.defined() ? shape_text(t.sizes()) : "undefined"; }

void require_shape(const torch::Tensor& t, at::IntArrayRef shape, const char* name, const char* where) {
  if (!t.defined() || t.sizes() != shape) {
    throw InputError(fmt::format("{}: {} has shape {}, expected {}", where, name, shape_of(t),
                                 shape_text(shape)));
  }
}

}  // namespace

torch::Tensor next_token_log_probs(const torch::Tensor& logits, const torch::Tensor& input_ids) {
  if (!logits.defined() || logits.dim() != 3 || !input_ids.defined() || input_ids.dim() != 2 ||
      logits.size(0) != input_ids.size(0) || logits.size(1) != input_ids.size(1)) {
    throw InputError(fmt::format("next_token_log_probs: logits {} and input_ids {} must be [B, S, V] and [B, S]",
                                 shape_of(logits), shape_of(input_ids)));
  }
  const int64_t batch = input_ids.size(0), steps = input_ids.size(1), vocab = logits.size(2);
  // Every position's row against the next token, over a [B*S, V] view of the logits (no copy);
  // the last position has no next token: its placeholder target 0 gives a value that is dropped,
  // so its gradient is zero.
  const torch::Tensor targets = torch::constant_pad_nd(input_ids.slice(1, 1, steps).to(torch::kInt64), {0, 1}, 0);
  const torch::Tensor all = token_log_probs(logits.reshape({batch * steps, vocab}), targets.reshape({-1}));
  return torch::constant_pad_nd(all.view({batch, steps}).slice(1, 0, steps - 1), {1, 0}, 0.0);
}

LossSum sft_loss(const torch::Tensor& logits, const torch::Tensor& input_ids, const torch::Tensor& loss_mask) {
  const torch::Tensor logp = next_token_log_probs(logits, input_ids);
  require_shape(loss_mask, input_ids.sizes(), "loss_mask", "sft_loss");
  torch::Tensor mask = loss_mask.to(torch::kFloat32);
  mask = mask.slice(1, 1, mask.size(1));  // column 0 is never a target
  LossSum out;
  out.sum = -(logp.slice(1, 1, logp.size(1)) * mask).sum();
  out.tokens = mask.sum();
  return out;
}

EntropySum token_entropy_sum(const torch::Tensor& logits, const torch::Tensor& loss_mask, int64_t chunk_rows) {
  if (!logits.defined() || logits.dim() != 3) {
    throw InputError(fmt::format("token_entropy_sum: logits have shape {}, expected [B, S, V]", shape_of(logits)));
  }
  require_shape(loss_mask, {logits.size(0), logits.size(1)}, "loss_mask", "token_entropy_sum");
  if (chunk_rows < 1) throw InputError(fmt::format("token_entropy_sum: chunk_rows {} must be >= 1", chunk_rows));
  torch::NoGradGuard no_grad;
  const int64_t batch = logits.size(0), steps = logits.size(1), vocab = logits.size(2);
  // Position t predicts token t+1: its weight is the target's mask, column t+1 (the last position
  // predicts nothing and weighs 0).
  const torch::Tensor weights =
      torch::constant_pad_nd(loss_mask.to(torch::kFloat32).slice(1, 1, steps), {0, 1}, 0.0).reshape({-1});
  const torch::Tensor rows = logits.detach().reshape({batch * steps, vocab});
  EntropySum out;
  out.sum = torch::zeros({}, weights.options().device(logits.device()));
  out.tokens = weights.sum().to(logits.device());
  const torch::Tensor w = weights.to(logits.device());
  for (int64_t start = 0; start < batch * steps; start += chunk_rows) {
    const int64_t end = std::min(batch * steps, start + chunk_rows);
    const torch::Tensor z = rows.slice(0, start, end).to(torch::kFloat32);
    const torch::Tensor log_p = torch::log_softmax(z, 1);
    // Logits of -inf (masked vocabulary) give p = 0 and log p = -inf: their term is 0, not NaN.
    const torch::Tensor terms = torch::where(torch::isfinite(log_p), log_p.exp() * log_p, torch::zeros_like(log_p));
    out.sum = out.sum + (-terms.sum(1) * w.slice(0, start, end)).sum();
  }
  return out;
}

torch::Tensor group_advantages(const torch::Tensor& rewards, int64_t group_size, double eps) {
  if (!rewards.defined() || rewards.dim() != 1 || group_size < 2 || rewards.size(0) == 0 ||
      rewards.size(0) % group_size != 0) {
    throw InputError(fmt::format("group_advantages: rewards {} must be a 1-D tensor of a positive multiple of "
                                 "group_size {} (>= 2) values", shape_of(rewards), group_size));
  }
  const torch::Tensor groups = rewards.to(torch::kFloat32).view({-1, group_size});
  const torch::Tensor mean = groups.mean(1, true);
  const torch::Tensor std = groups.std(1, /*unbiased=*/true, /*keepdim=*/true);
  return ((groups - mean) / (std + eps)).view({-1});
}

LossSum grpo_loss(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& advantages,
                  const torch::Tensor& loss_mask, const GrpoOptions& options,
                  const std::optional<torch::Tensor>& ref_logp) {
  constexpr const char* kWhere = "grpo_loss";
  if (!logp.defined() || logp.dim() != 2) {
    throw InputError(fmt::format("grpo_loss: logp has shape {}, expected [B, S]", shape_of(logp)));
  }
  require_shape(old_logp, logp.sizes(), "old_logp", kWhere);
  require_shape(loss_mask, logp.sizes(), "loss_mask", kWhere);
  require_shape(advantages, {logp.size(0)}, "advantages", kWhere);
  if (options.clip_epsilon_low < 0 || options.clip_epsilon_low >= 1 || options.clip_epsilon_high < 0 ||
      options.kl_beta < 0) {
    throw InputError(fmt::format("grpo_loss: clip epsilons must be in [0, 1) (low) and >= 0 (high), kl_beta >= 0; "
                                 "got low {}, high {}, beta {}", options.clip_epsilon_low,
                                 options.clip_epsilon_high, options.kl_beta));
  }
  if (options.kl_beta > 0) {
    if (!ref_logp) throw InputError("grpo_loss: kl_beta > 0 needs the reference log-probs (ref_logp)");
    require_shape(*ref_logp, logp.sizes(), "ref_logp", kWhere);
  }
  const torch::Tensor lp = logp.to(torch::kFloat32);
  const torch::Tensor mask = loss_mask.to(torch::kFloat32);
  const torch::Tensor adv = advantages.to(torch::kFloat32).detach().unsqueeze(1);
  const torch::Tensor ratio = torch::exp(lp - old_logp.to(torch::kFloat32).detach());
  const torch::Tensor unclipped = ratio * adv;
  const torch::Tensor clipped =
      ratio.clamp(1.0 - options.clip_epsilon_low, 1.0 + options.clip_epsilon_high) * adv;
  torch::Tensor per_token = -torch::min(unclipped, clipped);
  LossSum out;
  {
    torch::NoGradGuard no_grad;
    out.clipped_tokens = ((clipped < unclipped).to(torch::kFloat32) * mask).sum();
    out.tokens = mask.sum();
    out.kl_sum = torch::zeros({}, mask.options());
  }
  if (options.kl_beta > 0) {
    const torch::Tensor log_ref_over_policy = ref_logp->to(torch::kFloat32).detach() - lp;
    const torch::Tensor kl = torch::exp(log_ref_over_policy) - log_ref_over_policy - 1.0;
    per_token = per_token + options.kl_beta * kl;
    torch::NoGradGuard no_grad;
    out.kl_sum = (kl * mask).sum();
  }
  out.sum = (per_token * mask).sum();
  return out;
}

}  // namespace crl::rl
