// LoRA adapters for the policy model, attached from outside the model's code.
//
// For each targeted linear layer (chosen by the last part of its Hugging Face module name:
// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) the adapter holds A [r, in]
// (PEFT's init: uniform(+-1/sqrt(in))) and B [out, r] (zeros), and the layer computes with
// W = W0 + (alpha / r) * B A. apply() sets each targeted layer's weight to that expression (a
// tensor with autograd history into A and B) before a forward; the base weights stay the
// registered, frozen parameters. Cost of this form: one [out, in] weight per layer is
// materialised and backward forms its [out, in] gradient before reducing it to A and B, so a
// LoRA step costs about what a full step costs minus the optimiser; what it saves is optimiser
// memory and checkpoint size. Dropout on the adapter's input cannot be expressed as a weight
// delta, so lora dropout must be 0 (an InputError otherwise).
#pragma once

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

#include "policy/model.h"

namespace crl::policy {

struct LoraConfig {
  int64_t rank = 16;
  double alpha = 32.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

  double scale() const { return alpha / static_cast<double>(rank); }
  void validate() const;  // InputError: rank >= 1, alpha > 0, dropout == 0, known non-empty targets
};

class LoraAdapters {
 public:
  // Freezes every parameter of `model` and adds adapters (in the model's dtype and device) to the
  // targeted layers; `seed` draws A. The model must outlive this object.
  LoraAdapters(CausalLm model, LoraConfig config, uint64_t seed);

  // Targeted layers compute with W0 + scale * B A (call before every forward; under NoGradGuard
  // it gives merged weights for generation).
  void apply();
  // Targeted layers compute with W0 again.
  void remove();

  const LoraConfig& config() const { return config_; }
  // The trainable tensors by PEFT name: "base_model.model.<module>.lora_A.weight" / "lora_B".
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  // The model's state tensors (Hugging Face names) with every targeted weight merged:
  // W0 + scale * B A computed in fp32 and cast to the model dtype.
  std::vector<std::pair<std::string, torch::Tensor>> merged_state_tensors() const;
  // PEFT's adapter_config.json for these adapters.
  nlohmann::json adapter_config(const std::string& base_model) const;
  // Loads A and B from PEFT-named tensors (as written by named_parameters()); validates names and shapes.
  void load_adapter_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin);

 private:
  struct Adapter {
    std::string module_name;  // e.g. model.layers.0.self_attn.q_proj
    torch::nn::Linear linear{nullptr};
    torch::Tensor base_weight;  // the registered (frozen) parameter
    torch::Tensor a, b;
  };
  CausalLm model_;
  LoraConfig config_;
  std::vector<Adapter> adapters_;
};

}  // namespace crl::policy
