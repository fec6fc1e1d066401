// LoRA adapters for the policy model, as PEFT has them.
//
// For each targeted linear layer (chosen by the last part of its Hugging Face module name:
// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) the adapter holds A [r, in]
// (PEFT's init: uniform(+-1/sqrt(in))) and B [out, r] (zeros), and the layer computes
// y = W0 x + (alpha / r) * B A dropout(x): a branch beside the frozen layer (model.h,
// LoraBranch), so no [out, in] weight or gradient is ever formed and backward costs the base
// layer's input gradient plus two rank-r products. Dropout applies in training mode only.
// Export merges W0 + (alpha / r) * B A, which is what the adapted model computes without dropout.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <deque>
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
  void validate() const;  // InputError: rank >= 1, alpha > 0, 0 <= dropout < 1, known non-empty targets
};

class LoraAdapters {
 public:
  // Freezes every parameter of `model`, adds adapters (in the model's dtype and device) to the
  // targeted layers and attaches them: from here until this object is destroyed, every forward of
  // the model (training, generation, evaluation) goes through the adapters, so whoever owns the
  // adapters owns the adapted model. `seed` draws A. The model must outlive this object.
  LoraAdapters(CausalLm model, LoraConfig config, uint64_t seed);
  ~LoraAdapters();  // detaches the branches: the model computes W0 x again
  LoraAdapters(const LoraAdapters&) = delete;
  LoraAdapters& operator=(const LoraAdapters&) = delete;

  // Re-attaches the branches after remove(): targeted layers compute W0 x + scale * B A dropout(x)
  // (idempotent).
  void apply();
  // Detaches them for a look at the base model (targeted layers compute W0 x) until apply().
  void remove();
  bool attached() const { return attached_; }

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
    std::string projection;   // e.g. q_proj: the key in `slots`
    LoraSlots* slots = nullptr;  // of the attention or MLP module that holds the layer
    torch::Tensor base_weight;   // the registered (frozen) parameter
    LoraBranch branch;           // A, B, scale, dropout
  };
  CausalLm model_;
  LoraConfig config_;
  std::deque<Adapter> adapters_;  // a deque: the slots point at its elements
  bool attached_ = false;
};

}  // namespace crl::policy
