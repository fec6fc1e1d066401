// AdamW over fp32 master weights (see optimizer.h).
#include "rl/optimizer.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/error.h"

namespace crl::rl {

MasterAdamW::MasterAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  if (params_.empty()) throw InputError("MasterAdamW: no trainable parameters");
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : params_) {
    // A separate fp32 copy even for fp32 parameters, so the model's tensors are only written by
    // the copy-back (one code path for every dtype).
    masters_.push_back(param.detach().to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true));
    exp_avg_.push_back(torch::zeros_like(masters_.back()));
    exp_avg_sq_.push_back(torch::zeros_like(masters_.back()));
    step_counts_.push_back(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(param.device())));
    model_tensors_.push_back(param.detach());
  }
}

torch::Tensor MasterAdamW::clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm) {
  if (grads.empty()) return torch::zeros({}, torch::kFloat32);
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  const torch::Tensor total = torch::stack(norms).norm();
  if (max_norm > 0) at::_foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp_max(1.0));
  return total;
}

torch::Tensor MasterAdamW::non_finite(const torch::Tensor& grad_norm) {
  return grad_norm.detach().isfinite().logical_not().to(torch::kFloat32);
}

torch::Tensor MasterAdamW::step(const std::vector<torch::Tensor>& grads, double lr, torch::Tensor found_inf) {
  if (grads.size() != masters_.size()) {
    throw InputError(fmt::format("MasterAdamW::step: {} gradients for {} parameters", grads.size(), masters_.size()));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || grads[i].sizes() != masters_[i].sizes() || grads[i].scalar_type() != torch::kFloat32) {
      throw InputError(fmt::format("MasterAdamW::step: the gradient of {} must be fp32 with the parameter's shape",
                                   params_[i].first));
    }
  }
  torch::NoGradGuard no_grad;
  const torch::Device device = masters_[0].device();
  if (!found_inf.defined()) {
    found_inf = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, torch::ones_like(found_inf));
  } else if (found_inf.numel() != 1 || found_inf.scalar_type() != torch::kFloat32 || found_inf.device() != device) {
    throw InputError(fmt::format("MasterAdamW::step: found_inf must be one fp32 value on {}", device.str()));
  }
  found_inf = found_inf.reshape({});
  const torch::Tensor applied = 1.0 - found_inf;
  // The fused kernel reads the step count after incrementing it (bias corrections 1 - beta^t); a
  // skipped step adds 0, and the kernel returns before touching anything when found_inf is 1.
  at::_foreach_add_(step_counts_, applied);
  at::_fused_adamw_(masters_, grads, exp_avg_, exp_avg_sq_, {}, step_counts_, lr, options_.beta1, options_.beta2,
                    options_.weight_decay, options_.eps, /*amsgrad=*/false, /*maximize=*/false,
                    /*grad_scale=*/std::nullopt, found_inf);
  // One multi-tensor launch, casting to the model dtype. After a skipped step it writes what is
  // there already: the parameters are the rounded masters at every step's end.
  at::_foreach_copy_(model_tensors_, masters_);
  unsettled_applied_ = unsettled_applied_.defined() ? unsettled_applied_ + applied : applied;
  ++unsettled_steps_;
  return found_inf;
}

int64_t MasterAdamW::steps() const {
  if (unsettled_steps_ > 0) {
    steps_ += static_cast<int64_t>(std::llround(unsettled_applied_.item<double>()));
    unsettled_applied_ = torch::Tensor();
    unsettled_steps_ = 0;
  }
  return steps_;
}

void MasterAdamW::settle_step(bool skipped) {
  if (unsettled_steps_ != 1) {
    throw Error(fmt::format("MasterAdamW::settle_step: {} steps are unsettled, expected 1", unsettled_steps_));
  }
  if (!skipped) ++steps_;
  unsettled_applied_ = torch::Tensor();
  unsettled_steps_ = 0;
}

std::vector<std::pair<std::string, torch::Tensor>> MasterAdamW::state_tensors() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(params_[i].first + ".master", masters_[i]);
    out.emplace_back(params_[i].first + ".exp_avg", exp_avg_[i]);
    out.emplace_back(params_[i].first + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  out.emplace_back("step", torch::tensor({steps()}, torch::kInt64));
  return out;
}

void MasterAdamW::load_state_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) {
  const auto fetch = [&](const std::string& name, const torch::Tensor& like) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw InputError(fmt::format("{}: optimiser tensor \"{}\" is missing", origin, name));
    if (it->second.sizes() != like.sizes()) {
      throw InputError(fmt::format("{}: optimiser tensor \"{}\" has the wrong shape", origin, name));
    }
    return it->second;
  };
  const size_t expected = params_.size() * 3 + 1;
  if (tensors.size() != expected) {
    throw InputError(fmt::format("{}: {} optimiser tensors, expected {} (a different model or LoRA setting?)", origin,
                                 tensors.size(), expected));
  }
  const auto step_it = tensors.find("step");
  if (step_it == tensors.end() || step_it->second.numel() != 1) {
    throw InputError(fmt::format("{}: optimiser tensor \"step\" is missing", origin));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    masters_[i].copy_(fetch(name + ".master", masters_[i]));
    exp_avg_[i].copy_(fetch(name + ".exp_avg", exp_avg_[i]));
    exp_avg_sq_[i].copy_(fetch(name + ".exp_avg_sq", exp_avg_sq_[i]));
    params_[i].second.detach().copy_(masters_[i]);
  }
  steps_ = step_it->second.to(torch::kInt64).item<int64_t>();
  unsettled_applied_ = torch::Tensor();
  unsettled_steps_ = 0;
  for (auto& count : step_counts_) count.fill_(static_cast<double>(steps_));
}

}  // namespace crl::rl
