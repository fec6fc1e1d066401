// config.json parsing: both rope forms, defaults, strictness about unknown and inconsistent fields,
// round trip through to_json, and rotary frequencies against transformers' formulas.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "core/error.h"
#include "core/remove_tree.h"
#include "policy/config.h"
#include "policy/model.h"
#include "policy/model_shapes.h"
#include "policy/safetensors.h"

namespace crl::policy {
namespace {

using nlohmann::json;

// The published Qwen2.5-0.5B config.json (rope_theta form), as shipped on the Hub.
json qwen25_half_b() {
  return json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
}

// A Llama 3.1 style config (rope_scaling form with llama3 scaling).
json llama31() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 128256})");
}

std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, "some/config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ReadsPublishedQwen2Config) {
  const ModelConfig c = ModelConfig::from_json(qwen25_half_b(), "config.json");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.kv_groups(), 7);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_EQ(c.rope.type, RopeType::kDefault);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.dtype, "bfloat16");
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 151643);
}

TEST(ModelConfig, ReadsLlama3RopeScalingAndEosList) {
  const ModelConfig c = ModelConfig::from_json(llama31(), "config.json");
  EXPECT_EQ(c.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c.attention_bias);
}

TEST(ModelConfig, RopeParametersFormEqualsRopeScalingForm) {
  json v5 = llama31();
  v5.erase("rope_theta");
  v5["rope_parameters"] = v5["rope_scaling"];
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  v5.erase("rope_scaling");
  const ModelConfig a = ModelConfig::from_json(llama31(), "a");
  const ModelConfig b = ModelConfig::from_json(v5, "b");
  EXPECT_EQ(a.to_json(), b.to_json());
  // The old "type" key of rope_scaling is read too.
  json old = llama31();
  old["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_EQ(ModelConfig::from_json(old, "c").rope.type, RopeType::kLinear);
}

TEST(ModelConfig, RoundTripsThroughToJson) {
  for (const json& j : {qwen25_half_b(), llama31()}) {
    const ModelConfig a = ModelConfig::from_json(j, "a");
    const ModelConfig b = ModelConfig::from_json(a.to_json(), "b");
    EXPECT_EQ(a.to_json(), b.to_json());
    EXPECT_EQ(b.head_dim, a.head_dim);
    EXPECT_EQ(b.rope.type, a.rope.type);
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
  }
}

TEST(ModelConfig, UnknownFieldIsAnInputErrorNamingFileAndField) {
  json j = qwen25_half_b();
  j["num_experts"] = 8;
  const std::string message = error_of(j);
  EXPECT_NE(message.find("some/config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("num_experts"), std::string::npos) << message;
  json r = llama31();
  r["rope_scaling"]["mystery"] = 1;
  EXPECT_NE(error_of(r).find("rope_scaling.mystery"), std::string::npos) << error_of(r);
}

TEST(ModelConfig, InconsistentOrUnsupportedFieldsAreInputErrors) {
  auto expect_field = [](json j, const std::string& field) {
    const std::string message = error_of(j);
    EXPECT_NE(message.find("\"" + field), std::string::npos) << "expected an error naming " << field << ", got: " << message;
  };
  json j = qwen25_half_b();
  j["num_key_value_heads"] = 3;  // 14 heads are not a multiple of 3
  expect_field(j, "num_key_value_heads");
  j = qwen25_half_b();
  j["use_sliding_window"] = true;
  expect_field(j, "use_sliding_window");
  j = qwen25_half_b();
  j["hidden_act"] = "gelu";
  expect_field(j, "hidden_act");
  j = qwen25_half_b();
  j["hidden_size"] = "896";
  expect_field(j, "hidden_size");
  j = qwen25_half_b();
  j["eos_token_id"] = 999999;
  expect_field(j, "eos_token_id");
  j = qwen25_half_b();
  j["attention_bias"] = false;  // not a Qwen2 setting: transformers would ignore it
  expect_field(j, "attention_bias");
  j = qwen25_half_b();
  j["model_type"] = "mistral";
  expect_field(j, "model_type");
  j = llama31();
  j["rope_scaling"]["rope_type"] = "longrope";
  expect_field(j, "rope_scaling.rope_type");
  j = llama31();
  j["rope_scaling"].erase("low_freq_factor");
  expect_field(j, "rope_scaling.low_freq_factor");
  j = llama31();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  expect_field(j, "rope_scaling");  // both forms at once
  j = qwen25_half_b();
  j.erase("vocab_size");
  expect_field(j, "vocab_size");
  j = llama31();
  j["head_dim"] = 63;
  expect_field(j, "head_dim");
}

TEST(ModelConfig, LoadsFromDirectoryAndReportsBadJson) {
  const auto dir = std::filesystem::temp_directory_path() / "crl_config_test";
  std::filesystem::create_directories(dir);
  save_model_config(ModelConfig::from_json(qwen25_half_b(), "x"), dir / "config.json");
  EXPECT_EQ(load_model_config(dir).hidden_size, 896);
  std::ofstream(dir / "config.json") << "{ not json";
  EXPECT_THROW(load_model_config(dir), InputError);
  EXPECT_THROW(load_model_config(dir / "missing"), IoError);
  remove_tree(dir);
}

// A float where an integer belongs is range-checked before conversion: casting 1e30 to int64 is
// undefined behaviour (on x86 it gave INT64_MIN, which "must be positive" then hid).
TEST(ModelConfig, FloatsWhereIntegersBelongAreRangeCheckedBeforeConversion) {
  json j = qwen25_half_b();
  j["num_hidden_layers"] = 1e30;
  EXPECT_NE(error_of(j).find("some/config.json: field \"num_hidden_layers\": 1e+30 does not fit in 64 bits"),
            std::string::npos)
      << error_of(j);
  j["num_hidden_layers"] = -1e300;
  EXPECT_NE(error_of(j).find("\"num_hidden_layers\": -1e+300 does not fit in 64 bits"), std::string::npos) << error_of(j);
  j["num_hidden_layers"] = 2.5;
  EXPECT_NE(error_of(j).find("\"num_hidden_layers\": expected an integer, found number 2.5"), std::string::npos)
      << error_of(j);
  j["num_hidden_layers"] = 18446744073709551615ULL;
  EXPECT_NE(error_of(j).find("\"num_hidden_layers\": 18446744073709551615 does not fit in 64 bits"), std::string::npos)
      << error_of(j);
  j["num_hidden_layers"] = 24.0;  // an integral float, as some writers emit
  EXPECT_EQ(ModelConfig::from_json(j, "x").num_hidden_layers, 24);
  j = qwen25_half_b();
  j["eos_token_id"] = json::array({151643, 1e30});
  EXPECT_NE(error_of(j).find("\"eos_token_id[1]\": 1e+30 does not fit"), std::string::npos) << error_of(j);
}

TEST(ModelConfig, SizesAboveCrlsLimitsAreRefused) {
  const std::pair<const char*, int64_t> cases[] = {
      {"vocab_size", kMaxVocabSize + 1},          {"hidden_size", kMaxHiddenSize * 2},
      {"intermediate_size", kMaxIntermediateSize + 1}, {"num_hidden_layers", kMaxLayers + 1},
      {"max_position_embeddings", kMaxPositions + 1}, {"head_dim", kMaxHeadDim + 2}};
  for (const auto& [field, value] : cases) {
    json j = qwen25_half_b();
    j[field] = value;
    if (std::string(field) == "hidden_size") j["head_dim"] = 64;
    EXPECT_NE(error_of(j).find(fmt::format("field \"{}\": {} is above crl's limit", field, value)), std::string::npos)
        << field << ": " << error_of(j);
  }
}

const char* const kTestModels[] = {"qwen2_gqa2_tied", "qwen2_mha_untied", "llama3_gqa4_rope_llama3",
                                   "llama_mqa_bias_linear", "llama_yarn"};

std::filesystem::path test_model(const std::string& name) {
  return std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models" / name;
}

// parameter_shapes is what the pre-build check compares with: it must list exactly what
// CausalLm registers, name for name and shape for shape.
TEST(ModelShapes, ListExactlyTheParametersTheModelRegisters) {
  for (const char* name : kTestModels) {
    const ModelConfig config = load_model_config(test_model(name));
    const CausalLm model(config);
    std::vector<std::pair<std::string, std::vector<int64_t>>> built, listed;
    for (const auto& item : model->named_parameters(true)) built.emplace_back(item.key(), item.value().sizes().vec());
    for (const auto& p : parameter_shapes(config)) listed.emplace_back(p.name, p.shape);
    EXPECT_EQ(listed, built) << name;
    // And the committed checkpoints pass the header check.
    const SafetensorsCheckpoint checkpoint(test_model(name));
    std::vector<SafetensorsEntry> entries;
    for (const auto& n : checkpoint.names()) entries.push_back(checkpoint.entry(n));
    EXPECT_NO_THROW(check_checkpoint_shapes(config, entries, name)) << name;
  }
}

// A config whose sizes the checkpoint does not hold is refused from the safetensors header, before
// the model is built: here the model would need 2^22 x 2^16 floats (1 TiB) for the embedding alone.
TEST(ModelShapes, CheckpointIsComparedWithTheConfigBeforeTheModelIsBuilt) {
  const auto dir = std::filesystem::temp_directory_path() / "crl_model_shapes_test";
  remove_tree(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(test_model("qwen2_gqa2_tied") / "model.safetensors", dir / "model.safetensors");
  json j = json::parse(std::ifstream(test_model("qwen2_gqa2_tied") / "config.json"));
  j["vocab_size"] = int64_t{1} << 22;
  j["hidden_size"] = int64_t{1} << 16;
  j["head_dim"] = 64;
  std::ofstream(dir / "config.json") << j.dump();
  try {
    load_causal_lm(dir, torch::kFloat32, torch::kCPU);
    ADD_FAILURE() << "a config larger than its checkpoint loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor \"model.embed_tokens.weight\" has shape"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("but config.json implies 4194304x65536"), std::string::npos) << e.what();
  }
  // An extra or a missing tensor is named too.
  const ModelConfig config = load_model_config(test_model("qwen2_gqa2_tied"));
  std::vector<SafetensorsEntry> entries;
  for (const auto& p : parameter_shapes(config)) entries.push_back({p.name, "F32", p.shape, 0, 0});
  entries.push_back({"model.layers.99.mlp.up_proj.weight", "F32", {2, 2}, 0, 0});
  EXPECT_THROW(
      {
        try {
          check_checkpoint_shapes(config, entries, "ckpt");
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("\"model.layers.99.mlp.up_proj.weight\" is not part of this architecture"),
                    std::string::npos);
          throw;
        }
      },
      InputError);
  entries.pop_back();
  entries.front().dtype = "I64";
  EXPECT_THROW(check_checkpoint_shapes(config, entries, "ckpt"), InputError);
  entries.erase(entries.begin());
  EXPECT_THROW(check_checkpoint_shapes(config, entries, "ckpt"), InputError);
  remove_tree(dir);
}

TEST(RopeFrequencies, DefaultLinearAndLlama3FollowTransformersFormulas) {
  ModelConfig c = ModelConfig::from_json(llama31(), "x");
  const int64_t dim = c.head_dim;  // 64
  c.rope.type = RopeType::kDefault;
  const auto base = rope_frequencies(c);
  ASSERT_EQ(static_cast<int64_t>(base.inv_freq.size()), dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    EXPECT_NEAR(base.inv_freq[i], 1.0 / std::pow(500000.0, 2.0 * i / dim), 1e-6 * base.inv_freq[0]);
  }
  c.rope.type = RopeType::kLinear;
  c.rope.factor = 4.0;
  const auto linear = rope_frequencies(c);
  for (int64_t i = 0; i < dim / 2; ++i) EXPECT_FLOAT_EQ(linear.inv_freq[i], base.inv_freq[i] / 4.0f);
  c = ModelConfig::from_json(llama31(), "x");
  const auto llama3 = rope_frequencies(c);
  // High frequencies (wavelength < 8192/4) are kept; low ones (> 8192) divided by 32; between: smooth.
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double wavelen = 2 * std::numbers::pi / base.inv_freq[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_FLOAT_EQ(llama3.inv_freq[i], base.inv_freq[i]);
    } else if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(llama3.inv_freq[i], base.inv_freq[i] / 32.0f);
    } else {
      EXPECT_LT(llama3.inv_freq[i], base.inv_freq[i]);
      EXPECT_GT(llama3.inv_freq[i], base.inv_freq[i] / 32.0f);
    }
  }
  EXPECT_EQ(llama3.attention_scaling, 1.0);
}

TEST(RopeFrequencies, YarnAttentionFactorFromFactor) {
  json j = llama31();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const auto f = rope_frequencies(ModelConfig::from_json(j, "x"));
  EXPECT_NEAR(f.attention_scaling, 0.1 * std::log(4.0) + 1.0, 1e-12);
  // yarn without a factor scales by max_position_embeddings / original (131072 / 8192 = 16).
  j["rope_scaling"].erase("factor");
  EXPECT_DOUBLE_EQ(ModelConfig::from_json(j, "x").rope.factor, 16.0);
}

}  // namespace
}  // namespace crl::policy
