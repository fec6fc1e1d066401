// Reading, validating and writing Hugging Face config.json for Qwen2 / Llama; rotary frequencies.
#include "policy/config.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json_bounded.h"
#include "core/read_file.h"

namespace crl::policy {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& origin, const std::string& field, const std::string& what) {
  throw InputError(fmt::format("{}: field \"{}\": {}", origin, field, what));
}

std::string type_name(const json& v) { return v.type_name(); }

// `v` as an int64, or an InputError naming `name` in `origin`.
int64_t to_int(const json& v, const std::string& name, const std::string& origin) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail(origin, name, fmt::format("{} does not fit in 64 bits", v.dump()));
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  // Some writers emit integral floats (8192.0); accept those, refuse 0.5. The range check comes
  // first: converting a double outside int64's range (1e30) is undefined behaviour.
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 0x1p63) return static_cast<int64_t>(d);
    if (std::isfinite(d) && std::floor(d) == d) fail(origin, name, fmt::format("{} does not fit in 64 bits", v.dump()));
  }
  fail(origin, name, fmt::format("expected an integer, found {} {}", type_name(v), v.dump()));
}

int64_t read_int(const json& j, const std::string& key, const std::string& origin, const std::string& where = "") {
  return to_int(j.at(key), where.empty() ? key : where + "." + key, origin);
}

double read_number(const json& j, const std::string& key, const std::string& origin, const std::string& where = "") {
  const json& v = j.at(key);
  if (v.is_number()) return v.get<double>();
  fail(origin, where.empty() ? key : where + "." + key, fmt::format("expected a number, found {} {}", type_name(v), v.dump()));
}

bool read_bool(const json& j, const std::string& key, const std::string& origin) {
  const json& v = j.at(key);
  if (v.is_boolean()) return v.get<bool>();
  fail(origin, key, fmt::format("expected true or false, found {}", v.dump()));
}

std::string read_string(const json& j, const std::string& key, const std::string& origin) {
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  fail(origin, key, fmt::format("expected a string, found {}", v.dump()));
}

// Fields every PreTrainedConfig may carry that do not change what the model computes at inference.
const std::set<std::string>& inert_fields() {
  static const std::set<std::string> fields = {
      "_name_or_path", "transformers_version", "use_cache", "output_attentions", "output_hidden_states",
      "return_dict", "torchscript", "pretraining_tp", "id2label", "label2id", "problem_type",
      "tokenizer_class", "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params",
      "chunk_size_feed_forward", "pruned_heads", "tie_encoder_decoder", "is_decoder",
      "add_cross_attention", "cross_attention_hidden_size", "finetuning_task", "max_window_layers",
      "sliding_window", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
      "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
      "bad_words_ids", "num_return_sequences", "typical_p", "diversity_penalty", "num_beam_groups",
      "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
      "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
      "begin_suppress_tokens", "encoder_no_repeat_ngram_size", "use_return_dict",
      "tf_legacy_loss", "use_bfloat16", "torch_compile"};
  return fields;
}

std::optional<int64_t> read_optional_token(const json& j, const std::string& key, const std::string& origin) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return read_int(j, key, origin);
}

RopeType parse_rope_type(const std::string& name, const std::string& origin, const std::string& field) {
  if (name == "default") return RopeType::kDefault;
  if (name == "linear") return RopeType::kLinear;
  if (name == "dynamic") return RopeType::kDynamic;
  if (name == "yarn") return RopeType::kYarn;
  if (name == "llama3") return RopeType::kLlama3;
  fail(origin, field, fmt::format("rope type \"{}\" is not supported (crl implements default, linear, "
                                  "dynamic, yarn and llama3)", name));
}

// Reads the rotary settings from one object: rope_parameters (transformers 5) or rope_scaling (older),
// where `theta` comes from inside the object or from the top-level rope_theta.
RopeSettings parse_rope_object(const json& r, std::optional<double> top_level_theta, const std::string& origin,
                               const std::string& field) {
  if (!r.is_object()) fail(origin, field, fmt::format("expected an object, found {}", r.dump()));
  static const std::set<std::string> known = {
      "rope_type", "type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
      "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
      "mscale_all_dim", "truncate", "partial_rotary_factor"};
  for (const auto& [key, value] : r.items()) {
    if (!known.contains(key)) fail(origin, field + "." + key, "unknown rotary setting");
  }
  RopeSettings rope;
  std::string type_name = "default";
  if (r.contains("rope_type")) {
    if (!r["rope_type"].is_string()) fail(origin, field + ".rope_type", "expected a string");
    type_name = r["rope_type"].get<std::string>();
  } else if (r.contains("type")) {
    if (!r["type"].is_string()) fail(origin, field + ".type", "expected a string");
    type_name = r["type"].get<std::string>();
  }
  rope.type = parse_rope_type(type_name, origin, field + ".rope_type");
  if (r.contains("rope_theta")) {
    rope.theta = read_number(r, "rope_theta", origin, field);
  } else if (top_level_theta) {
    rope.theta = *top_level_theta;
  }
  if (r.contains("partial_rotary_factor") && read_number(r, "partial_rotary_factor", origin, field) != 1.0) {
    fail(origin, field + ".partial_rotary_factor", "partial rotary embeddings are not supported (must be 1.0)");
  }
  auto number_or = [&](const char* key, double fallback) {
    return r.contains(key) && !r[key].is_null() ? read_number(r, key, origin, field) : fallback;
  };
  auto need = [&](const char* key) {
    if (!r.contains(key) || r[key].is_null()) {
      fail(origin, field + "." + key, fmt::format("required by rope type \"{}\"", type_name));
    }
  };
  if (rope.type != RopeType::kDefault && rope.type != RopeType::kYarn) need("factor");
  rope.factor = number_or("factor", 1.0);
  if (rope.type == RopeType::kLlama3) {
    need("low_freq_factor");
    need("high_freq_factor");
    need("original_max_position_embeddings");
  }
  rope.low_freq_factor = number_or("low_freq_factor", 1.0);
  rope.high_freq_factor = number_or("high_freq_factor", 4.0);
  if (r.contains("original_max_position_embeddings") && !r["original_max_position_embeddings"].is_null()) {
    rope.original_max_position_embeddings = read_int(r, "original_max_position_embeddings", origin, field);
  }
  if (r.contains("attention_factor") && !r["attention_factor"].is_null()) {
    rope.attention_factor = read_number(r, "attention_factor", origin, field);
  }
  // transformers reads beta_fast/beta_slow with `or`, so 0 and null both mean the default.
  rope.beta_fast = number_or("beta_fast", 32.0);
  if (rope.beta_fast == 0) rope.beta_fast = 32.0;
  rope.beta_slow = number_or("beta_slow", 1.0);
  if (rope.beta_slow == 0) rope.beta_slow = 1.0;
  if (r.contains("mscale") && !r["mscale"].is_null()) rope.mscale = read_number(r, "mscale", origin, field);
  if (r.contains("mscale_all_dim") && !r["mscale_all_dim"].is_null()) {
    rope.mscale_all_dim = read_number(r, "mscale_all_dim", origin, field);
  }
  if (r.contains("truncate")) {
    if (!r["truncate"].is_boolean()) fail(origin, field + ".truncate", "expected true or false");
    rope.truncate = r["truncate"].get<bool>();
  }
  if (rope.type == RopeType::kLlama3 && rope.high_freq_factor <= rope.low_freq_factor) {
    fail(origin, field + ".high_freq_factor", "must be greater than low_freq_factor");
  }
  if (rope.factor <= 0 && rope.type != RopeType::kDefault) fail(origin, field + ".factor", "must be positive");
  return rope;
}

}  // namespace

std::string rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kDynamic: return "dynamic";
    case RopeType::kYarn: return "yarn";
    case RopeType::kLlama3: return "llama3";
  }
  return "default";
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) throw InputError(fmt::format("{}: expected a JSON object at the top level", origin));
  static const std::set<std::string> used = {
      "model_type", "architectures", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
      "max_position_embeddings", "tie_word_embeddings", "attention_bias", "mlp_bias",
      "initializer_range", "torch_dtype", "dtype", "bos_token_id", "eos_token_id", "pad_token_id",
      "rope_theta", "rope_scaling", "rope_parameters", "hidden_act", "use_sliding_window",
      "layer_types", "attention_dropout", "partial_rotary_factor", "use_mrope"};
  for (const auto& [key, value] : j.items()) {
    if (!used.contains(key) && !inert_fields().contains(key)) {
      fail(origin, key, "unknown field for a Qwen2/Llama config (crl refuses fields it does not understand, "
                        "so that a checkpoint never loads into a model that computes something else)");
    }
  }
  ModelConfig c;
  if (!j.contains("model_type")) fail(origin, "model_type", "missing (expected \"qwen2\" or \"llama\")");
  c.model_type = read_string(j, "model_type", origin);
  if (c.model_type != "qwen2" && c.model_type != "llama") {
    fail(origin, "model_type", fmt::format("\"{}\" is not supported (expected \"qwen2\" or \"llama\")", c.model_type));
  }
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    if (!j["architectures"].is_array()) fail(origin, "architectures", "expected a list of strings");
    for (const auto& a : j["architectures"]) {
      if (!a.is_string()) fail(origin, "architectures", "expected a list of strings");
      const std::string name = a.get<std::string>();
      if (name != "Qwen2ForCausalLM" && name != "LlamaForCausalLM") {
        fail(origin, "architectures", fmt::format("\"{}\" is not supported (expected Qwen2ForCausalLM or "
                                                  "LlamaForCausalLM)", name));
      }
      c.architectures.push_back(name);
    }
  }
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}) {
    if (!j.contains(key)) fail(origin, key, "missing");
  }
  c.vocab_size = read_int(j, "vocab_size", origin);
  c.hidden_size = read_int(j, "hidden_size", origin);
  c.intermediate_size = read_int(j, "intermediate_size", origin);
  c.num_hidden_layers = read_int(j, "num_hidden_layers", origin);
  c.num_attention_heads = read_int(j, "num_attention_heads", origin);
  c.num_key_value_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                              ? read_int(j, "num_key_value_heads", origin)
                              : c.num_attention_heads;
  if (c.num_attention_heads <= 0) fail(origin, "num_attention_heads", "must be positive");
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? read_int(j, "head_dim", origin)
                                                                   : c.hidden_size / c.num_attention_heads;
  if (j.contains("rms_norm_eps")) c.rms_norm_eps = read_number(j, "rms_norm_eps", origin);
  if (j.contains("max_position_embeddings")) c.max_position_embeddings = read_int(j, "max_position_embeddings", origin);
  if (j.contains("tie_word_embeddings")) c.tie_word_embeddings = read_bool(j, "tie_word_embeddings", origin);
  if (c.model_type == "qwen2") {
    // Qwen2 always has q/k/v biases and none on o_proj; a flag saying otherwise would be ignored
    // by transformers, so it is refused rather than silently disagreeing.
    for (const char* key : {"attention_bias", "mlp_bias"}) {
      if (j.contains(key)) fail(origin, key, "not a Qwen2 setting (Qwen2 has q/k/v biases and no others)");
    }
    c.attention_bias = true;
    c.attention_output_bias = false;
    c.mlp_bias = false;
  } else {
    if (j.contains("attention_bias")) c.attention_bias = read_bool(j, "attention_bias", origin);
    c.attention_output_bias = c.attention_bias;
    if (j.contains("mlp_bias")) c.mlp_bias = read_bool(j, "mlp_bias", origin);
  }
  if (j.contains("initializer_range")) c.initializer_range = read_number(j, "initializer_range", origin);
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (j.contains(key) && !j[key].is_null()) {
      c.dtype = read_string(j, key, origin);
      if (c.dtype != "float32" && c.dtype != "bfloat16" && c.dtype != "float16") {
        fail(origin, key, fmt::format("\"{}\" is not supported (float32, bfloat16 or float16)", c.dtype));
      }
      break;
    }
  }
  c.bos_token_id = read_optional_token(j, "bos_token_id", origin);
  c.pad_token_id = read_optional_token(j, "pad_token_id", origin);
  if (j.contains("eos_token_id") && !j["eos_token_id"].is_null()) {
    const json& e = j["eos_token_id"];
    if (e.is_array()) {
      for (size_t i = 0; i < e.size(); ++i) {
        c.eos_token_ids.push_back(to_int(e[i], fmt::format("eos_token_id[{}]", i), origin));
      }
    } else {
      c.eos_token_ids.push_back(read_int(j, "eos_token_id", origin));
    }
  }
  if (j.contains("hidden_act") && read_string(j, "hidden_act", origin) != "silu") {
    fail(origin, "hidden_act", fmt::format("\"{}\" is not supported (crl implements SwiGLU with silu)",
                                           j["hidden_act"].get<std::string>()));
  }
  if (j.contains("use_sliding_window") && read_bool(j, "use_sliding_window", origin)) {
    fail(origin, "use_sliding_window", "sliding-window attention is not supported (must be false)");
  }
  if (j.contains("use_mrope") && read_bool(j, "use_mrope", origin)) {
    fail(origin, "use_mrope", "multimodal rotary embeddings are not supported (must be false)");
  }
  if (j.contains("attention_dropout") && read_number(j, "attention_dropout", origin) != 0.0) {
    fail(origin, "attention_dropout", "attention dropout is not implemented (must be 0)");
  }
  if (j.contains("partial_rotary_factor") && read_number(j, "partial_rotary_factor", origin) != 1.0) {
    fail(origin, "partial_rotary_factor", "partial rotary embeddings are not supported (must be 1.0)");
  }
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& lt = j["layer_types"];
    if (!lt.is_array()) fail(origin, "layer_types", "expected a list");
    for (size_t i = 0; i < lt.size(); ++i) {
      if (!lt[i].is_string() || lt[i].get<std::string>() != "full_attention") {
        fail(origin, fmt::format("layer_types[{}]", i), fmt::format("{} is not supported (only \"full_attention\")", lt[i].dump()));
      }
    }
    if (static_cast<int64_t>(lt.size()) != c.num_hidden_layers) {
      fail(origin, "layer_types", fmt::format("has {} entries for {} layers", lt.size(), c.num_hidden_layers));
    }
  }
  // Rotary settings: rope_parameters (transformers 5) or rope_theta + rope_scaling (published checkpoints).
  std::optional<double> top_theta;
  if (j.contains("rope_theta") && !j["rope_theta"].is_null()) top_theta = read_number(j, "rope_theta", origin);
  const bool has_params = j.contains("rope_parameters") && !j["rope_parameters"].is_null();
  const bool has_scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  if (has_params && has_scaling) {
    fail(origin, "rope_scaling", "given together with rope_parameters; keep one of the two forms");
  }
  if (has_params) {
    c.rope = parse_rope_object(j["rope_parameters"], top_theta, origin, "rope_parameters");
    if (top_theta && j["rope_parameters"].contains("rope_theta") && *top_theta != c.rope.theta) {
      fail(origin, "rope_theta", fmt::format("{} disagrees with rope_parameters.rope_theta {}", *top_theta, c.rope.theta));
    }
  } else if (has_scaling) {
    c.rope = parse_rope_object(j["rope_scaling"], top_theta, origin, "rope_scaling");
  } else if (top_theta) {
    c.rope.theta = *top_theta;
  }
  if (c.rope.original_max_position_embeddings == 0 &&
      (c.rope.type == RopeType::kYarn || c.rope.type == RopeType::kLlama3)) {
    c.rope.original_max_position_embeddings = c.max_position_embeddings;
  }
  // yarn without a factor scales by the context extension, as transformers does (DeepSeek-V3 style).
  const json* rope_object = has_params ? &j["rope_parameters"] : has_scaling ? &j["rope_scaling"] : nullptr;
  if (c.rope.type == RopeType::kYarn && rope_object &&
      (!rope_object->contains("factor") || (*rope_object)["factor"].is_null())) {
    c.rope.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(c.rope.original_max_position_embeddings);
  }
  c.validate(origin);
  return c;
}

void ModelConfig::validate(const std::string& origin) const {
  // Each size lies in [1, limit]. The limits are far above any published Qwen2/Llama model
  // (vocabularies of 152k, 8k-wide layers of 30k, 128 layers) and low enough that products of
  // sizes (a weight's element count, heads * head_dim) cannot overflow 64 bits.
  auto in_range = [&](const char* name, int64_t v, int64_t limit) {
    if (v <= 0) fail(origin, name, fmt::format("must be positive, is {}", v));
    if (v > limit) fail(origin, name, fmt::format("{} is above crl's limit of {}", v, limit));
  };
  in_range("vocab_size", vocab_size, kMaxVocabSize);
  in_range("hidden_size", hidden_size, kMaxHiddenSize);
  in_range("intermediate_size", intermediate_size, kMaxIntermediateSize);
  in_range("num_hidden_layers", num_hidden_layers, kMaxLayers);
  in_range("num_attention_heads", num_attention_heads, kMaxHeads);
  in_range("num_key_value_heads", num_key_value_heads, kMaxHeads);
  in_range("head_dim", head_dim, kMaxHeadDim);
  in_range("max_position_embeddings", max_position_embeddings, kMaxPositions);
  if (rope.type == RopeType::kYarn || rope.type == RopeType::kLlama3) {
    in_range("rope_parameters.original_max_position_embeddings", rope.original_max_position_embeddings, kMaxPositions);
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    fail(origin, "num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}", num_key_value_heads,
                                                    num_attention_heads));
  }
  if (head_dim % 2 != 0) fail(origin, "head_dim", fmt::format("{} is odd; rotary embeddings need an even size", head_dim));
  if (!(rms_norm_eps > 0)) fail(origin, "rms_norm_eps", "must be positive");
  if (!(rope.theta > 1)) fail(origin, "rope_theta", fmt::format("must be greater than 1, is {}", rope.theta));
  if (!(initializer_range >= 0)) fail(origin, "initializer_range", "must not be negative");
  auto token_in_vocab = [&](const char* name, int64_t id) {
    if (id < 0 || id >= vocab_size) fail(origin, name, fmt::format("{} is outside the vocabulary [0, {})", id, vocab_size));
  };
  if (bos_token_id) token_in_vocab("bos_token_id", *bos_token_id);
  if (pad_token_id) token_in_vocab("pad_token_id", *pad_token_id);
  for (int64_t id : eos_token_ids) token_in_vocab("eos_token_id", id);
}

json ModelConfig::to_json() const {
  json j;
  j["architectures"] = architectures.empty()
                           ? std::vector<std::string>{model_type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}
                           : architectures;
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["rms_norm_eps"] = rms_norm_eps;
  j["max_position_embeddings"] = max_position_embeddings;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["initializer_range"] = initializer_range;
  j["attention_dropout"] = 0.0;
  j["use_cache"] = true;
  j["dtype"] = dtype;
  if (model_type == "llama") {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = mlp_bias;
  } else {
    j["use_sliding_window"] = false;
  }
  j["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  if (eos_token_ids.empty()) {
    j["eos_token_id"] = nullptr;
  } else if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids[0];
  } else {
    j["eos_token_id"] = eos_token_ids;
  }
  j["pad_token_id"] = pad_token_id ? json(*pad_token_id) : json(nullptr);
  json r;
  r["rope_type"] = rope_type_name(rope.type);
  r["rope_theta"] = rope.theta;
  if (rope.type != RopeType::kDefault) r["factor"] = rope.factor;
  if (rope.type == RopeType::kLlama3) {
    r["low_freq_factor"] = rope.low_freq_factor;
    r["high_freq_factor"] = rope.high_freq_factor;
  }
  if (rope.type == RopeType::kLlama3 || rope.type == RopeType::kYarn) {
    r["original_max_position_embeddings"] = rope.original_max_position_embeddings;
  }
  if (rope.type == RopeType::kYarn) {
    if (rope.attention_factor) r["attention_factor"] = *rope.attention_factor;
    r["beta_fast"] = rope.beta_fast;
    r["beta_slow"] = rope.beta_slow;
    if (rope.mscale) r["mscale"] = *rope.mscale;
    if (rope.mscale_all_dim) r["mscale_all_dim"] = *rope.mscale_all_dim;
    r["truncate"] = rope.truncate;
  }
  j["rope_parameters"] = r;
  return j;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  const std::string text = read_file(file, "model config (a Hugging Face config.json)");
  return ModelConfig::from_json(parse_json_bounded(text, file.string()), file.string());
}

void save_model_config(const ModelConfig& config, const std::filesystem::path& file) {
  std::ofstream out(file);
  if (!out) throw IoError(fmt::format("{}: cannot open for writing", file.string()));
  out << config.to_json().dump(2) << "\n";
  if (!out) throw IoError(fmt::format("{}: write failed", file.string()));
}

}  // namespace crl::policy
