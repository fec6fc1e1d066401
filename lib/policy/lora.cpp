// LoRA adapters as branches beside the model's linear layers (see lora.h).
#include "policy/lora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace crl::policy {
namespace {

const std::set<std::string>& known_targets() {
  static const std::set<std::string> names{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return names;
}

}  // namespace

void LoraConfig::validate() const {
  if (rank < 1 || !(alpha > 0)) {
    throw InputError(fmt::format("lora: rank must be >= 1 and alpha > 0 (got rank {}, alpha {})", rank, alpha));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw InputError(fmt::format("lora: dropout must be in [0, 1) (got {})", dropout));
  }
  if (target_modules.empty()) throw InputError("lora: target_modules is empty");
  for (const auto& t : target_modules) {
    if (!known_targets().count(t)) {
      throw InputError(fmt::format("lora: target module \"{}\" is not one of q_proj, k_proj, v_proj, o_proj, "
                                   "gate_proj, up_proj, down_proj", t));
    }
  }
}

LoraAdapters::LoraAdapters(CausalLm model, LoraConfig config, uint64_t seed)
    : model_(std::move(model)), config_(std::move(config)) {
  config_.validate();
  for (auto& param : model_->parameters()) param.set_requires_grad(false);
  const std::set<std::string> targets(config_.target_modules.begin(), config_.target_modules.end());
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto add = [&](const std::string& owner, LoraSlots& slots, const std::string& projection,
                       const torch::nn::Linear& linear) {
    if (!targets.count(projection)) return;
    Adapter& adapter = adapters_.emplace_back();
    adapter.module_name = owner + "." + projection;
    adapter.projection = projection;
    adapter.slots = &slots;
    adapter.base_weight = linear->weight;
    const int64_t out_features = adapter.base_weight.size(0), in_features = adapter.base_weight.size(1);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    const auto options = torch::TensorOptions().dtype(adapter.base_weight.scalar_type()).device(adapter.base_weight.device());
    adapter.branch.a = (torch::rand({config_.rank, in_features}, generator, torch::kFloat32) * (2 * bound) - bound)
                           .to(options).set_requires_grad(true);
    adapter.branch.b = torch::zeros({out_features, config_.rank}, options).set_requires_grad(true);
    adapter.branch.scale = config_.scale();
    adapter.branch.dropout = config_.dropout;
  };
  // In module order, so adapters (and their PEFT names) come layer by layer, q k v o gate up down.
  for (const auto& item : model_->named_modules()) {
    if (auto* attn = dynamic_cast<AttentionImpl*>(item.value().get())) {
      add(item.key(), attn->lora, "q_proj", attn->q_proj);
      add(item.key(), attn->lora, "k_proj", attn->k_proj);
      add(item.key(), attn->lora, "v_proj", attn->v_proj);
      add(item.key(), attn->lora, "o_proj", attn->o_proj);
    } else if (auto* mlp = dynamic_cast<MlpImpl*>(item.value().get())) {
      add(item.key(), mlp->lora, "gate_proj", mlp->gate_proj);
      add(item.key(), mlp->lora, "up_proj", mlp->up_proj);
      add(item.key(), mlp->lora, "down_proj", mlp->down_proj);
    }
  }
  if (adapters_.empty()) throw InputError("lora: no linear layer of the model matches target_modules");
  apply();
}

LoraAdapters::~LoraAdapters() { remove(); }

void LoraAdapters::apply() {
  for (auto& adapter : adapters_) adapter.slots->branches[adapter.projection] = &adapter.branch;
  attached_ = true;
}

void LoraAdapters::remove() {
  for (auto& adapter : adapters_) adapter.slots->branches.erase(adapter.projection);
  attached_ = false;
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapters::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& adapter : adapters_) {
    out.emplace_back("base_model.model." + adapter.module_name + ".lora_A.weight", adapter.branch.a);
    out.emplace_back("base_model.model." + adapter.module_name + ".lora_B.weight", adapter.branch.b);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapters::merged_state_tensors() const {
  torch::NoGradGuard no_grad;
  std::map<const void*, torch::Tensor> merged;
  for (const auto& adapter : adapters_) {
    const torch::Tensor delta =
        config_.scale() * adapter.branch.b.to(torch::kFloat32).mm(adapter.branch.a.to(torch::kFloat32));
    merged[adapter.base_weight.unsafeGetTensorImpl()] =
        (adapter.base_weight.to(torch::kFloat32) + delta).to(adapter.base_weight.scalar_type());
  }
  std::vector<std::pair<std::string, torch::Tensor>> out = state_tensors(model_);
  for (auto& [name, tensor] : out) {
    const auto it = merged.find(tensor.unsafeGetTensorImpl());
    if (it != merged.end()) tensor = it->second;
  }
  return out;
}

nlohmann::json LoraAdapters::adapter_config(const std::string& base_model) const {
  return {{"peft_type", "LORA"},
          {"task_type", "CAUSAL_LM"},
          {"base_model_name_or_path", base_model},
          {"r", config_.rank},
          {"lora_alpha", config_.alpha},
          {"lora_dropout", config_.dropout},
          {"target_modules", config_.target_modules},
          {"bias", "none"},
          {"fan_in_fan_out", false},
          {"use_rslora", false},
          {"use_dora", false},
          {"init_lora_weights", true},
          {"inference_mode", true},
          {"modules_to_save", nullptr}};
}

void LoraAdapters::load_adapter_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) {
  const auto named = named_parameters();
  if (tensors.size() != named.size()) {
    throw InputError(fmt::format("{}: {} adapter tensors, expected {} (rank or target modules differ?)", origin,
                                 tensors.size(), named.size()));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : named) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) throw InputError(fmt::format("{}: adapter tensor \"{}\" is missing", origin, name));
    if (it->second.sizes() != tensor.sizes()) {
      throw InputError(fmt::format("{}: adapter tensor \"{}\" has the wrong shape", origin, name));
    }
    tensor.detach().copy_(it->second);
  }
}

}  // namespace crl::policy
