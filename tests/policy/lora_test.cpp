// Tests of LoRA adapters: no change at init, only adapters train, merged export equals the
// adapted model, PEFT names and config, settings validated.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "tiny_model.h"
#include "policy/config.h"
#include "policy/lora.h"
#include "policy/model.h"

namespace crl::policy {
namespace {

using testing::tiny_model;

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

// The branch form equals the weight-delta form W0 + scale * B A, in outputs and in A's and B's
// gradients (without dropout).
TEST(Lora, BranchEqualsTheMergedWeightInOutputAndGradients) {
  CausalLm model = tiny_model(5);
  CausalLm merged = tiny_model(5);
  LoraConfig config;
  config.rank = 3;
  config.target_modules = {"q_proj", "down_proj"};
  LoraAdapters lora(model, config, 2);
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(9);
    for (auto& [name, p] : lora.named_parameters()) p.normal_(0, 0.1);
  }
  lora.apply();
  const torch::Tensor ids = torch::randint(0, 320, {2, 6}, torch::kInt64);
  model->forward(ids).logsumexp(-1).sum().backward();
  // The same adapters as explicit weight deltas on a copy of the model.
  std::vector<torch::Tensor> a_copies, b_copies;
  const auto named = lora.named_parameters();
  for (size_t i = 0; i < named.size(); i += 2) {
    a_copies.push_back(named[i].second.detach().clone().set_requires_grad(true));
    b_copies.push_back(named[i + 1].second.detach().clone().set_requires_grad(true));
  }
  for (auto& p : merged->parameters()) p.set_requires_grad(false);
  size_t k = 0;
  for (const auto& layer_module : *merged->model->layers) {
    auto* layer = layer_module->as<DecoderLayer>();
    for (torch::nn::Linear* linear : {&layer->self_attn->q_proj, &layer->mlp->down_proj}) {
      (*linear)->weight = (*linear)->weight.detach() + config.scale() * b_copies[k].mm(a_copies[k]);
      ++k;
    }
  }
  const torch::Tensor expected = merged->forward(ids);
  EXPECT_TRUE(torch::allclose(model->forward(ids), expected, 1e-5, 1e-5));
  expected.logsumexp(-1).sum().backward();
  // Round-off differs between the two forms (B A x against B (A x)): compare against the gradient's scale.
  const auto close = [](const torch::Tensor& got, const torch::Tensor& want) {
    return (got - want).abs().max().item<double>() <= 1e-5 * want.abs().max().item<double>() + 1e-8;
  };
  for (size_t i = 0; i < a_copies.size(); ++i) {
    EXPECT_TRUE(close(named[2 * i].second.grad(), a_copies[i].grad())) << named[2 * i].first;
    EXPECT_TRUE(close(named[2 * i + 1].second.grad(), b_copies[i].grad())) << named[2 * i + 1].first;
  }
}

// Dropout on the branch's input: active in training mode only, and seeded like any torch dropout.
TEST(Lora, DropoutActsInTrainingModeOnly) {
  CausalLm model = tiny_model(8);
  LoraConfig config;
  config.rank = 4;
  config.dropout = 0.5;
  LoraAdapters lora(model, config, 1);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : lora.named_parameters()) p.normal_(0, 0.2);
  }
  lora.apply();
  const torch::Tensor ids = torch::randint(0, 320, {2, 6}, torch::kInt64);
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor eval_a = model->forward(ids), eval_b = model->forward(ids);
  EXPECT_TRUE(torch::equal(eval_a, eval_b));
  model->train();
  torch::manual_seed(3);
  const torch::Tensor train_a = model->forward(ids);
  torch::manual_seed(3);
  const torch::Tensor train_b = model->forward(ids);
  const torch::Tensor train_c = model->forward(ids);
  EXPECT_TRUE(torch::equal(train_a, train_b));     // same seed, same masks
  EXPECT_FALSE(torch::allclose(train_a, train_c));  // new masks
  EXPECT_FALSE(torch::allclose(train_a, eval_a));
  EXPECT_EQ(lora.adapter_config("base")["lora_dropout"], 0.5);
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
  dropout.dropout = 1.0;
  EXPECT_THROW(LoraAdapters(model, dropout, 1), InputError);
  dropout.dropout = -0.1;
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
