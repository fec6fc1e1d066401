// The policy model against transformers: fp32 logits of tiny random models (made by
// tools/golden/make_model_golden.py) within 1e-4 relative error, through a plain forward, a
// left-padded batch, and the paged-KV prefill + decode path; plus state round trips.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "policy/model.h"
#include "policy/safetensors.h"

namespace crl::policy {
namespace {

// The models here are tiny: one intra-op thread is fastest and keeps a busy CI machine from
// stalling in OpenMP spin-waits.
const bool kSingleThreaded = (torch::set_num_threads(1), true);


const std::filesystem::path kModels = std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models";

// max|a - b| / max|b|: relative to the logits' scale, so single logits near zero do not dominate.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor b32 = b.to(torch::kFloat32).cpu();
  return ((a.to(torch::kFloat32).cpu() - b32).abs().max() / b32.abs().max()).item<double>();
}

struct Golden {
  torch::Tensor input_ids, logits_fp32;
};

Golden read_golden(const std::string& name) {
  const SafetensorsFile file(kModels / name / "golden.safetensors");
  return {file.tensor("input_ids").clone(), file.tensor("logits_fp32").clone()};
}

class GoldenModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModel, Fp32LogitsMatchTransformers) {
  const Golden golden = read_golden(GetParam());
  CausalLm model = load_causal_lm(kModels / GetParam(), torch::kFloat32, torch::kCPU);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(golden.input_ids);
  ASSERT_EQ(logits.sizes(), golden.logits_fp32.sizes());
  EXPECT_LE(relative_error(logits, golden.logits_fp32), 1e-4) << GetParam();
}

TEST_P(GoldenModel, LeftPaddedRowMatchesTransformersUnpadded) {
  const Golden golden = read_golden(GetParam());
  CausalLm model = load_causal_lm(kModels / GetParam(), torch::kFloat32, torch::kCPU);
  torch::NoGradGuard no_grad;
  const int64_t steps = golden.input_ids.size(1);
  const int64_t pad = 4;
  // Row 1 becomes 4 padding tokens then its first steps-4 tokens; causal logits at those tokens
  // must equal transformers' logits for the unpadded prefix.
  torch::Tensor ids = golden.input_ids.clone();
  ids[1].narrow(0, pad, steps - pad).copy_(golden.input_ids[1].narrow(0, 0, steps - pad));
  ids[1].narrow(0, 0, pad).fill_(0);
  torch::Tensor padding = torch::ones({2, steps}, torch::kInt64);
  padding[1].narrow(0, 0, pad).fill_(0);
  ForwardInputs in;
  in.input_ids = ids;
  in.padding_mask = padding;
  const torch::Tensor logits = model->forward(in);
  EXPECT_LE(relative_error(logits[0], golden.logits_fp32[0]), 1e-4);
  EXPECT_LE(relative_error(logits[1].narrow(0, pad, steps - pad), golden.logits_fp32[1].narrow(0, 0, steps - pad)), 1e-4);
}

TEST_P(GoldenModel, PagedPrefillAndDecodeMatchTransformers) {
  const Golden golden = read_golden(GetParam());
  CausalLm model = load_causal_lm(kModels / GetParam(), torch::kFloat32, torch::kCPU);
  torch::NoGradGuard no_grad;
  const int64_t steps = golden.input_ids.size(1);
  // Blocks of 4 slots, so both rows cross blocks; row 0's blocks are out of order in the pool.
  PagedKvCache cache = PagedKvCache::allocate(model->config(), 10, 4, torch::kFloat32, torch::kCPU);
  const std::vector<std::vector<int64_t>> tables = {{7, 2, 5}, {1, 3, 4}};
  const std::vector<int64_t> lengths = {5, 3};  // prompt tokens prefilled per row
  const auto slot = [&](int64_t row, int64_t t) { return tables[row][t / 4] * 4 + t % 4; };
  for (int64_t b = 0; b < 2; ++b) {
    ForwardInputs in;
    in.input_ids = golden.input_ids[b].narrow(0, 0, lengths[b]).view({1, -1});
    in.position_ids = torch::arange(lengths[b], torch::kInt64).view({1, -1});
    in.cache = &cache;
    std::vector<int64_t> slots;
    for (int64_t t = 0; t < lengths[b]; ++t) slots.push_back(slot(b, t));
    in.cache_slots = torch::tensor(slots, torch::kInt64);
    const torch::Tensor logits = model->forward(in);  // the fused causal pass, as in training
    EXPECT_LE(relative_error(logits[0], golden.logits_fp32[b].narrow(0, 0, lengths[b])), 1e-4) << GetParam() << " prefill " << b;
  }
  // Then both rows together, one golden token per step, each over its own blocks.
  const torch::Tensor table = torch::tensor(std::vector<int64_t>{7, 2, 5, 1, 3, 4}, torch::kInt64).view({2, 3});
  for (int64_t t = 0; t + lengths[0] < steps; ++t) {
    std::vector<int64_t> ids, positions, slots, length;
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t position = lengths[b] + t;
      ids.push_back(golden.input_ids[b][position].item<int64_t>());
      positions.push_back(position);
      slots.push_back(slot(b, position));
      length.push_back(position + 1);
    }
    ForwardInputs in;
    in.input_ids = torch::tensor(ids, torch::kInt64).view({2, 1});
    in.position_ids = torch::tensor(positions, torch::kInt64).view({2, 1});
    in.cache = &cache;
    in.cache_slots = torch::tensor(slots, torch::kInt64);
    in.block_tables = table;
    in.attention_mask = torch::arange(12, torch::kInt64).view({1, 1, 1, 12}) < torch::tensor(length, torch::kInt64).view({2, 1, 1, 1});
    const torch::Tensor logits = model->forward(in);
    for (int64_t b = 0; b < 2; ++b) {
      EXPECT_LE(relative_error(logits[b][0], golden.logits_fp32[b][positions[b]]), 1e-4)
          << GetParam() << " row " << b << " position " << positions[b];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transformers, GoldenModel,
                         ::testing::Values("qwen2_gqa2_tied", "qwen2_mha_untied", "llama3_gqa4_rope_llama3",
                                           "llama_mqa_bias_linear", "llama_yarn"));

TEST(CausalLm, AnUninitialisedBuildHasEveryParameterAtItsShape) {
  const ModelConfig config = load_model_config(kModels / "llama_mqa_bias_linear");
  CausalLm initialised(config);
  CausalLm bare(config, WeightInit::kUninitialised);
  const auto a = state_tensors(initialised);
  const auto b = state_tensors(bare);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.sizes(), b[i].second.sizes()) << a[i].first;
    EXPECT_TRUE(b[i].second.requires_grad()) << a[i].first;
  }
  EXPECT_EQ(bare->model->embed_tokens->options.num_embeddings(), config.vocab_size);
  // Loading fills it completely: the same logits as the initialised model after the same load.
  const auto tensors = SafetensorsCheckpoint(kModels / "llama_mqa_bias_linear").load_all();
  load_state(initialised, tensors, "test");
  load_state(bare, tensors, "test");
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>{3, 1, 4, 1, 5}, torch::kInt64).view({1, 5});
  EXPECT_TRUE(torch::equal(initialised->forward(ids), bare->forward(ids)));
}

TEST(CausalLm, ParameterNamesAreHuggingFaces) {
  const ModelConfig config = load_model_config(kModels / "llama_mqa_bias_linear");
  CausalLm model(config);
  std::set<std::string> names;
  for (const auto& [name, tensor] : state_tensors(model)) names.insert(name);
  for (const char* expected : {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                               "model.layers.0.self_attn.q_proj.bias", "model.layers.1.self_attn.o_proj.bias",
                               "model.layers.1.mlp.down_proj.bias", "model.layers.0.input_layernorm.weight",
                               "model.layers.0.post_attention_layernorm.weight", "model.norm.weight"}) {
    EXPECT_TRUE(names.contains(expected)) << expected;
  }
  EXPECT_FALSE(names.contains("lm_head.weight"));  // tied
  // Exactly the tensors transformers saved, no more, no fewer.
  const SafetensorsCheckpoint saved(kModels / "llama_mqa_bias_linear");
  const auto saved_names = saved.names();
  EXPECT_EQ(std::set<std::string>(saved_names.begin(), saved_names.end()), names);
}

TEST(CausalLm, LoadStateRejectsMissingMisshapenAndUnknownTensors) {
  const auto dir = kModels / "qwen2_mha_untied";
  CausalLm model(load_model_config(dir));
  const SafetensorsCheckpoint checkpoint(dir);
  auto tensors = checkpoint.load_all();
  auto expect_error_naming = [&](const std::map<std::string, torch::Tensor>& t, const std::string& name) {
    try {
      load_state(model, t, "ckpt");
      ADD_FAILURE() << "no error for " << name;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  };
  auto missing = tensors;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  expect_error_naming(missing, "model.layers.1.mlp.up_proj.weight");
  auto misshapen = tensors;
  misshapen["model.norm.weight"] = torch::ones({7});
  expect_error_naming(misshapen, "model.norm.weight");
  auto extra = tensors;
  extra["model.layers.9.mlp.up_proj.weight"] = torch::ones({1});
  expect_error_naming(extra, "model.layers.9.mlp.up_proj.weight");
  EXPECT_NO_THROW(load_state(model, tensors, "ckpt"));
}

TEST(CausalLm, SavedStateReloadsToIdenticalLogits) {
  const auto dir = kModels / "qwen2_gqa2_tied";
  CausalLm model = load_causal_lm(dir, torch::kFloat32, torch::kCPU);
  const auto out = std::filesystem::temp_directory_path() / "crl_model_roundtrip";
  std::filesystem::create_directories(out);
  save_model_config(model->config(), out / "config.json");
  NamedTensors named;
  for (const auto& [name, tensor] : state_tensors(model)) named.emplace_back(name, tensor);
  write_safetensors(out / "model.safetensors", named);
  CausalLm again = load_causal_lm(out, torch::kFloat32, torch::kCPU);
  const torch::Tensor ids = torch::arange(10).view({1, 10});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model->forward(ids), again->forward(ids)));
  remove_tree(out);
}

TEST(CausalLm, InitWeightsIsSeededAndFollowsInitializerRange) {
  ModelConfig config = load_model_config(kModels / "qwen2_gqa2_tied");
  config.initializer_range = 0.02;
  CausalLm a(config), b(config), c(config);
  init_weights(a, 7);
  init_weights(b, 7);
  init_weights(c, 8);
  const torch::Tensor wa = a->model->layers[0]->as<DecoderLayer>()->mlp->up_proj->weight;
  EXPECT_TRUE(torch::equal(wa, b->model->layers[0]->as<DecoderLayer>()->mlp->up_proj->weight));
  EXPECT_FALSE(torch::equal(wa, c->model->layers[0]->as<DecoderLayer>()->mlp->up_proj->weight));
  EXPECT_NEAR(wa.std().item<double>(), 0.02, 0.002);
  EXPECT_TRUE(torch::equal(a->model->norm->weight, torch::ones_like(a->model->norm->weight)));
  EXPECT_EQ(a->model->layers[0]->as<DecoderLayer>()->self_attn->q_proj->bias.abs().sum().item<double>(), 0.0);
}

TEST(CausalLm, Bf16RunsOnCpuCloseToFp32) {
  const Golden golden = read_golden("qwen2_gqa2_tied");
  CausalLm model = load_causal_lm(kModels / "qwen2_gqa2_tied", torch::kBFloat16, torch::kCPU);
  EXPECT_EQ(model->dtype(), torch::kBFloat16);
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(golden.input_ids);
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  // Loose: bf16 keeps ~3 significant digits; the GPU test holds bf16 to transformers' own bf16 drift.
  EXPECT_LE(relative_error(logits, golden.logits_fp32), 0.1);
}

}  // namespace
}  // namespace crl::policy
