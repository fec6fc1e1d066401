// Tests of LoRA adapters: no change at init, only adapters train, merged export equals the
// adapted model, PEFT names and config, settings validated.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "policy/config.h"
#include "policy/lora.h"
#include "policy/model.h"

namespace crl::policy {
namespace {

const std::filesystem::path kModels = std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models";

CausalLm tiny_model(uint64_t seed) {
  CausalLm model(load_model_config(kModels / "qwen2_gqa2_tied"));
  init_weights(model, seed);
  return model;
}

TEST(Lora, StartsAsTheBaseModelAndTrainsOnlyAdapters) {
  CausalLm model = tiny_model(3);
  const torch::Tensor ids = torch::randint(0, 320, {2, 7}, torch::kInt64);
  const torch::Tensor base_logits = model->forward(ids).detach();
  LoraConfig config;
  config.rank = 4;
  config.alpha = 8;
  LoraAdapters lora(model, config, 11);
  for (const auto& p : model->parameters()) EXPECT_FALSE(p.requires_grad());
  // 2 layers x 7 projections x (A, B).
  ASSERT_EQ(lora.named_parameters().size(), 28u);
  EXPECT_EQ(lora.named_parameters()[0].first, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  lora.apply();
  EXPECT_TRUE(torch::allclose(model->forward(ids), base_logits, 1e-6, 1e-6));  // B = 0

  // A gradient step on the adapters changes the output; the base weights do not change.
  const torch::Tensor before = model->model->layers[0]->as<DecoderLayer>()->self_attn->q_proj->named_parameters()["weight"].clone();
  model->forward(ids).logsumexp(-1).sum().backward();
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : lora.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      p.sub_(p.grad() * 0.1);
    }
  }
  lora.apply();
  const torch::Tensor adapted = model->forward(ids).detach();
  EXPECT_FALSE(torch::allclose(adapted, base_logits, 1e-4, 1e-4));
  EXPECT_TRUE(torch::equal(model->model->layers[0]->as<DecoderLayer>()->self_attn->q_proj->named_parameters()["weight"], before));

  // Merged export, loaded into a plain model, computes what the adapted model computes.
  CausalLm merged = tiny_model(99);
  std::map<std::string, torch::Tensor> tensors;
  for (auto& [name, t] : lora.merged_state_tensors()) tensors[name] = t;
  load_state(merged, tensors, "merged");
  EXPECT_TRUE(torch::allclose(merged->forward(ids), adapted, 1e-4, 1e-5));

  // remove() returns to the base weights.
  lora.remove();
  EXPECT_TRUE(torch::allclose(model->forward(ids), base_logits, 1e-6, 1e-6));
}

TEST(Lora, TargetsOnlyTheNamedModulesAndWritesPeftConfig) {
  CausalLm model = tiny_model(1);
  LoraConfig config;
  config.rank = 2;
  config.alpha = 4;
  config.target_modules = {"q_proj", "v_proj"};
  LoraAdapters lora(model, config, 1);
  const auto params = lora.named_parameters();
  ASSERT_EQ(params.size(), 8u);
  EXPECT_EQ(params[2].first, "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight");
  EXPECT_EQ(params[3].second.sizes(), (std::vector<int64_t>{model->config().num_key_value_heads * model->config().head_dim, 2}));
  const nlohmann::json cfg = lora.adapter_config("base");
  EXPECT_EQ(cfg["peft_type"], "LORA");
  EXPECT_EQ(cfg["r"], 2);
  EXPECT_EQ(cfg["lora_alpha"], 4.0);
  EXPECT_EQ(cfg["target_modules"], nlohmann::json({"q_proj", "v_proj"}));
}

TEST(Lora, RejectsUnsupportedSettings) {
  CausalLm model = tiny_model(1);
  LoraConfig dropout;
  dropout.dropout = 0.05;
  EXPECT_THROW(LoraAdapters(model, dropout, 1), InputError);
  LoraConfig unknown;
  unknown.target_modules = {"lm_head"};
  EXPECT_THROW(LoraAdapters(model, unknown, 1), InputError);
  LoraConfig rank0;
  rank0.rank = 0;
  EXPECT_THROW(LoraAdapters(model, rank0, 1), InputError);
}

}  // namespace
}  // namespace crl::policy
