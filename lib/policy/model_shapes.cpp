// Parameter shapes from a config, and the checkpoint-header check; see model_shapes.h.
#include "policy/model_shapes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "core/error.h"

namespace crl::policy {

std::vector<ParameterShape> parameter_shapes(const ModelConfig& c) {
  std::vector<ParameterShape> out;
  const int64_t h = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  auto linear = [&](const std::string& prefix, int64_t in, int64_t outputs, bool bias) {
    out.push_back({prefix + ".weight", {outputs, in}});
    if (bias) out.push_back({prefix + ".bias", {outputs}});
  };
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = fmt::format("model.layers.{}", i);
    out.push_back({layer + ".input_layernorm.weight", {h}});
    linear(layer + ".self_attn.q_proj", h, q, c.attention_bias);
    linear(layer + ".self_attn.k_proj", h, kv, c.attention_bias);
    linear(layer + ".self_attn.v_proj", h, kv, c.attention_bias);
    linear(layer + ".self_attn.o_proj", q, h, c.attention_output_bias);
    out.push_back({layer + ".post_attention_layernorm.weight", {h}});
    linear(layer + ".mlp.gate_proj", h, c.intermediate_size, c.mlp_bias);
    linear(layer + ".mlp.up_proj", h, c.intermediate_size, c.mlp_bias);
    linear(layer + ".mlp.down_proj", c.intermediate_size, h, c.mlp_bias);
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

void check_checkpoint_shapes(const ModelConfig& config, const std::vector<SafetensorsEntry>& entries,
                             const std::string& origin) {
  std::map<std::string, const SafetensorsEntry*> by_name;
  for (const auto& e : entries) by_name[e.name] = &e;
  auto is_floating = [](const std::string& dtype) { return dtype.starts_with("F") || dtype == "BF16"; };
  for (const auto& p : parameter_shapes(config)) {
    const auto it = by_name.find(p.name);
    if (it == by_name.end()) {
      throw InputError(fmt::format("{}: tensor \"{}\" is missing (the config's architecture needs it)", origin, p.name));
    }
    const SafetensorsEntry& e = *it->second;
    if (e.shape != p.shape) {
      throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but config.json implies {}", origin, p.name,
                                   fmt::join(e.shape, "x"), fmt::join(p.shape, "x")));
    }
    if (!is_floating(e.dtype)) {
      throw InputError(fmt::format("{}: tensor \"{}\" has dtype {}; a floating-point dtype is needed", origin, p.name,
                                   e.dtype));
    }
    by_name.erase(it);
  }
  for (const auto& [name, e] : by_name) {
    if (name.ends_with("rotary_emb.inv_freq")) continue;  // older checkpoints saved the (recomputed) buffer
    if (name == "lm_head.weight" && config.tie_word_embeddings &&
        e->shape == std::vector<int64_t>{config.vocab_size, config.hidden_size}) {
      continue;  // load_state checks it equals the embedding
    }
    throw InputError(fmt::format("{}: tensor \"{}\" is not part of this architecture (check config.json)", origin, name));
  }
}

}  // namespace crl::policy
