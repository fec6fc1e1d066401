// The architecture of a Qwen2 / Llama-family causal LM, read from (and written to) Hugging Face config.json.
//
// Both forms of the rotary settings are read: published checkpoints carry `rope_theta` and
// `rope_scaling`; transformers 5 writes one `rope_parameters` object instead. Unknown fields, and
// fields whose value would change the architecture in a way crl does not implement (sliding
// windows, partial rotary, an activation other than SiLU), are InputErrors naming config.json and
// the field, so a checkpoint never loads into a model that computes something else.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace crl::policy {

// Upper bounds of config.json's sizes (ModelConfig::validate refuses larger ones).
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 17;
inline constexpr int64_t kMaxIntermediateSize = int64_t{1} << 20;
inline constexpr int64_t kMaxLayers = int64_t{1} << 12;
inline constexpr int64_t kMaxHeads = int64_t{1} << 12;
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 12;
inline constexpr int64_t kMaxPositions = int64_t{1} << 28;

// How rotary frequencies are rescaled for long contexts (transformers' rope_type).
enum class RopeType { kDefault, kLinear, kDynamic, kYarn, kLlama3 };

std::string rope_type_name(RopeType type);

struct RopeSettings {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;                               // linear, dynamic, yarn, llama3
  double low_freq_factor = 1.0;                      // llama3
  double high_freq_factor = 4.0;                     // llama3
  int64_t original_max_position_embeddings = 0;     // llama3, yarn (0: not given)
  std::optional<double> attention_factor;            // yarn
  double beta_fast = 32.0;                           // yarn
  double beta_slow = 1.0;                            // yarn
  std::optional<double> mscale, mscale_all_dim;      // yarn
  bool truncate = true;                              // yarn
};

struct ModelConfig {
  std::string model_type = "qwen2";                  // "qwen2" or "llama"
  std::vector<std::string> architectures;            // e.g. {"Qwen2ForCausalLM"}
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;                              // hidden_size / heads unless given
  double rms_norm_eps = 1e-6;
  int64_t max_position_embeddings = 32768;
  bool tie_word_embeddings = false;
  bool attention_bias = false;                       // q,k,v bias (qwen2: always; llama: q,k,v,o)
  bool attention_output_bias = false;                // o_proj bias (llama with attention_bias)
  bool mlp_bias = false;                             // llama's mlp_bias
  double initializer_range = 0.02;
  std::string dtype = "float32";                     // torch_dtype / dtype: float32, bfloat16, float16
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  RopeSettings rope;

  int64_t kv_groups() const { return num_attention_heads / num_key_value_heads; }

  // Parses config.json's object; `origin` (the file path) names the source in every error.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& origin);
  // The config.json transformers 5 writes for this architecture (rope_parameters form).
  nlohmann::json to_json() const;
  // Throws InputError (naming origin and the field) unless sizes are positive, within the
  // limits above and consistent.
  void validate(const std::string& origin) const;
};

// Reads and validates DIR/config.json (or the file itself when given a file).
ModelConfig load_model_config(const std::filesystem::path& path);
// Writes config.json (pretty-printed); throws IoError on failure.
void save_model_config(const ModelConfig& config, const std::filesystem::path& file);

// Rotary inverse frequencies (defined in rope_frequencies.cpp, the one part that needs LibTorch;
// head_dim / 2 values, float32, as transformers computes them at init)
// and the factor cos and sin are multiplied by (yarn's attention factor; 1 otherwise).
struct RopeFrequencies {
  std::vector<float> inv_freq;
  double attention_scaling = 1.0;
};
RopeFrequencies rope_frequencies(const ModelConfig& config);

}  // namespace crl::policy
