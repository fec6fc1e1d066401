// Tests of the training step: the fused causal attention path and activation checkpointing give
// the plain masked pass's logits and gradients (full and LoRA), gradient accumulation equals one
// large batch, SFT learns, non-finite gradients skip the step, and generation between LoRA steps
// samples the trained adapters, and a generation engine kept across steps (as the job keeps one per
// trainer) samples the updated weights and adapters.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "dist/communicator.h"
#include "policy/config.h"
#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "policy/tiny_model.h"
#include "rl/train_step.h"

namespace crl::rl {
namespace {

using policy::CausalLm;
using policy::ForwardInputs;
using policy::LoraAdapters;
using policy::LoraConfig;
using policy::testing::tiny_model;

// Cross-entropy sum over loss-masked next tokens (the SFT loss, written here without crl::rl).
torch::Tensor masked_next_token_nll(const torch::Tensor& logits, const torch::Tensor& ids, const torch::Tensor& mask) {
  const int64_t s = ids.size(1);
  const torch::Tensor logp = logits.slice(1, 0, s - 1).to(torch::kFloat32).log_softmax(-1);
  const torch::Tensor picked = logp.gather(-1, ids.slice(1, 1, s).unsqueeze(-1)).squeeze(-1);
  return -(picked * mask.slice(1, 1, s).to(torch::kFloat32)).sum();
}

struct Batch {
  torch::Tensor ids, padding, loss_mask;
};

Batch make_batch(int64_t rows, int64_t steps, uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.ids = torch::randint(0, 320, {rows, steps}, torch::kInt64);
  b.padding = torch::ones({rows, steps}, torch::kInt64);
  b.padding.index_put_({0, torch::indexing::Slice(0, 2)}, 0);  // row 0 left-padded by two
  b.loss_mask = torch::zeros({rows, steps}, torch::kInt64);
  b.loss_mask.index_put_({torch::indexing::Slice(), torch::indexing::Slice(steps / 2, steps)}, 1);
  return b;
}

// Without a padding mask, attention takes SDPA's fused causal path (no mask tensor, GQA in the
// kernel); with an all-ones padding mask it takes the masked path. Both must give the same logits
// and gradients (the tiny model has 2 query heads per kv head).
TEST(FusedCausalAttention, SameLogitsAndGradientsAsTheMaskedPath) {
  CausalLm fused = tiny_model(6);
  CausalLm masked = tiny_model(6);
  ASSERT_GT(fused->config().num_attention_heads, fused->config().num_key_value_heads);
  const Batch b = make_batch(3, 9, 2);
  ForwardInputs plain_in;
  plain_in.input_ids = b.ids;
  ForwardInputs masked_in = plain_in;
  masked_in.padding_mask = torch::ones_like(b.ids);
  const torch::Tensor fused_logits = fused->forward(plain_in);
  const torch::Tensor masked_logits = masked->forward(masked_in);
  ASSERT_TRUE(torch::allclose(fused_logits, masked_logits, 1e-5, 1e-6))
      << "max diff " << (fused_logits - masked_logits).abs().max().item<float>();
  masked_next_token_nll(fused_logits, b.ids, b.loss_mask).backward();
  masked_next_token_nll(masked_logits, b.ids, b.loss_mask).backward();
  const auto masked_params = masked->named_parameters();
  for (const auto& item : fused->named_parameters()) {
    const torch::Tensor& g = item.value().grad();
    const torch::Tensor& h = masked_params[item.key()].grad();
    ASSERT_TRUE(g.defined() && h.defined()) << item.key();
    // Different kernels round differently: fp32 round-off relative to the gradient's scale.
    const double diff = (g - h).abs().max().item<double>();
    EXPECT_LE(diff, 1e-4 * h.abs().max().item<double>() + 1e-7) << item.key();
  }
  // The checkpointed forward takes the same fused path without a padding mask.
  CausalLm checkpointed = tiny_model(6);
  EXPECT_TRUE(torch::allclose(forward_with_checkpointing(checkpointed, b.ids, torch::Tensor()), fused_logits, 1e-5, 1e-6));
}

TEST(ActivationCheckpointing, SameLogitsAndGradientsAsThePlainPass) {
  CausalLm plain = tiny_model(5);
  CausalLm checkpointed = tiny_model(5);
  const Batch b = make_batch(3, 9, 1);
  ForwardInputs in;
  in.input_ids = b.ids;
  in.padding_mask = b.padding;
  const torch::Tensor plain_logits = plain->forward(in);
  const torch::Tensor ckpt_logits = forward_with_checkpointing(checkpointed, b.ids, b.padding);
  ASSERT_TRUE(torch::allclose(plain_logits, ckpt_logits, 1e-5, 1e-6));
  masked_next_token_nll(plain_logits, b.ids, b.loss_mask).backward();
  masked_next_token_nll(ckpt_logits, b.ids, b.loss_mask).backward();
  const auto plain_params = plain->named_parameters();
  const auto ckpt_params = checkpointed->named_parameters();
  for (const auto& item : plain_params) {
    const torch::Tensor& g = item.value().grad();
    const torch::Tensor& h = ckpt_params[item.key()].grad();
    ASSERT_TRUE(g.defined() && h.defined()) << item.key();
    EXPECT_TRUE(torch::allclose(g, h, 1e-4, 1e-6)) << item.key() << " max diff " << (g - h).abs().max().item<float>();
  }
}

// With LoRA dropout as well: the recomputation in backward replays forward's dropout masks.
TEST(ActivationCheckpointing, LoraGradientsMatchThePlainPass) {
  CausalLm plain = tiny_model(6);
  CausalLm checkpointed = tiny_model(6);
  LoraConfig config;
  config.rank = 4;
  config.dropout = 0.3;
  LoraAdapters plain_lora(plain, config, 3);
  LoraAdapters ckpt_lora(checkpointed, config, 3);
  // Non-zero B, so gradients reach A as well.
  {
    torch::NoGradGuard no_grad;
    for (auto* l : {&plain_lora, &ckpt_lora}) {
      torch::manual_seed(4);
      for (auto& [name, p] : l->named_parameters()) p.normal_(0, 0.05);
    }
  }
  const Batch b = make_batch(2, 8, 2);
  plain_lora.apply();
  ckpt_lora.apply();
  ForwardInputs in;
  in.input_ids = b.ids;
  in.padding_mask = b.padding;
  plain->train();
  checkpointed->train();
  torch::manual_seed(21);
  masked_next_token_nll(plain->forward(in), b.ids, b.loss_mask).backward();
  torch::manual_seed(21);
  masked_next_token_nll(forward_with_checkpointing(checkpointed, b.ids, b.padding), b.ids, b.loss_mask).backward();
  const auto p = plain_lora.named_parameters();
  const auto c = ckpt_lora.named_parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_TRUE(p[i].second.grad().defined() && c[i].second.grad().defined()) << p[i].first;
    EXPECT_TRUE(torch::allclose(p[i].second.grad(), c[i].second.grad(), 1e-4, 1e-6)) << p[i].first;
  }
}

TrainerOptions test_options(bool checkpointing) {
  TrainerOptions o;
  o.schedule = LrSchedule{1e-2, 2, 20, 0.1};
  o.adamw.weight_decay = 0.01;
  o.max_grad_norm = 1.0;
  o.activation_checkpointing = checkpointing;
  o.reducer.bucket_bytes = 16 * 1024;  // several buckets even for the tiny model
  return o;
}

TEST(Trainer, TwoMicroBatchesEqualOneBatchOfBoth) {
  auto comm = dist::make_local_communicator();
  CausalLm one = tiny_model(8), two = tiny_model(8);
  Trainer big(one, test_options(false), *comm);
  Trainer accumulated(two, test_options(true), *comm);
  const auto loss = [](const std::vector<MicroBatch>& mbs) {
    return [&mbs](const torch::Tensor& logits, size_t i) {
      return masked_next_token_nll(logits, mbs[i].input_ids, mbs[i].loss_mask);
    };
  };
  for (uint64_t step = 0; step < 3; ++step) {
    const Batch b = make_batch(4, 10, 100 + step);
    const std::vector<MicroBatch> whole{{b.ids, b.padding, b.loss_mask}};
    const std::vector<MicroBatch> halves{{b.ids.slice(0, 0, 2), b.padding.slice(0, 0, 2), b.loss_mask.slice(0, 0, 2)},
                                         {b.ids.slice(0, 2, 4), b.padding.slice(0, 2, 4), b.loss_mask.slice(0, 2, 4)}};
    const StepStats s1 = big.step(whole, loss(whole));
    const StepStats s2 = accumulated.step(halves, loss(halves));
    EXPECT_EQ(s1.tokens, s2.tokens);
    EXPECT_NEAR(s1.loss, s2.loss, 1e-5);
    EXPECT_NEAR(s1.grad_norm, s2.grad_norm, 1e-4 * s1.grad_norm);
  }
  EXPECT_GT(accumulated.reducer().bucket_count(), 1u);
  for (const auto& item : one->named_parameters()) {
    // A key bias shifts every score of a query equally, so softmax cancels it: its true gradient
    // is 0 and what backward computes is round-off, which Adam's normalisation blows up to full
    // steps of arbitrary sign. Nothing to compare there.
    if (item.key().find("k_proj.bias") != std::string::npos) continue;
    EXPECT_TRUE(torch::allclose(item.value(), two->named_parameters()[item.key()], 1e-4, 1e-6)) << item.key();
  }
}

// The trainer drops a padding mask that has only right padding (for the fused attention path):
// its loss must equal the masked pass's. Left padding keeps the mask; checked the same way.
TEST(Trainer, RightPaddedMaskIsDroppedExactlyAndLeftPaddingKept) {
  auto comm = dist::make_local_communicator();
  for (const bool left : {false, true}) {
    Batch b = make_batch(3, 10, 11);
    b.padding.fill_(1);
    for (int64_t row = 0; row < 3; ++row) {
      const int64_t pads = row + 1;
      b.padding[row].narrow(0, left ? 0 : 10 - pads, pads).fill_(0);
    }
    b.loss_mask = b.loss_mask * b.padding;
    CausalLm model = tiny_model(12);
    ForwardInputs in;
    in.input_ids = b.ids;
    in.padding_mask = b.padding;
    double expected = 0;
    {
      torch::NoGradGuard no_grad;
      const double tokens = b.loss_mask.slice(1, 1).sum().item<double>();
      expected = masked_next_token_nll(model->forward(in), b.ids, b.loss_mask).item<double>() / tokens;
    }
    Trainer trainer(model, test_options(false), *comm);
    const std::vector<MicroBatch> mbs{{b.ids, b.padding, b.loss_mask}};
    const StepStats stats =
        trainer.step(mbs, [&](const torch::Tensor& logits, size_t) { return masked_next_token_nll(logits, b.ids, b.loss_mask); });
    EXPECT_NEAR(stats.loss, expected, 1e-5 * expected) << (left ? "left" : "right") << " padding";
  }
}

TEST(Trainer, SftLossFallsOnAFixedBatchFullAndLora) {
  auto comm = dist::make_local_communicator();
  const Batch b = make_batch(2, 12, 7);
  const std::vector<MicroBatch> mbs{{b.ids, b.padding, b.loss_mask}};
  const auto loss = [&](const torch::Tensor& logits, size_t) { return masked_next_token_nll(logits, b.ids, b.loss_mask); };
  for (bool use_lora : {false, true}) {
    CausalLm model = tiny_model(9);
    LoraConfig config;
    config.rank = 8;
    std::unique_ptr<LoraAdapters> lora = use_lora ? std::make_unique<LoraAdapters>(model, config, 2) : nullptr;
    TrainerOptions o = test_options(use_lora);
    o.schedule = LrSchedule{use_lora ? 2e-2 : 5e-3, 0, 30, 1.0};
    Trainer trainer(model, o, *comm, lora.get());
    const double first = trainer.step(mbs, loss).loss;
    double last = first;
    for (int i = 0; i < 15; ++i) last = trainer.step(mbs, loss).loss;
    EXPECT_LT(last, 0.5 * first) << (use_lora ? "lora" : "full") << ": first " << first << " last " << last;
    EXPECT_EQ(trainer.optimizer().steps(), 16);
  }
}

// A loss that turns NaN for one step makes every gradient NaN: the trainer reports the step as
// skipped, the model and the optimiser's state stay bitwise as they were, and the next finite step
// equals the one a trainer that never saw the NaN takes.
TEST(Trainer, NonFiniteGradientsSkipTheStepAndTheNextStepProceeds) {
  auto comm = dist::make_local_communicator();
  CausalLm model = tiny_model(13), twin_model = tiny_model(13);
  Trainer trainer(model, test_options(false), *comm);
  Trainer twin(twin_model, test_options(false), *comm);
  const Batch b = make_batch(2, 10, 5);
  const std::vector<MicroBatch> mbs{{b.ids, b.padding, b.loss_mask}};
  const auto loss = [&](const torch::Tensor& logits, size_t) { return masked_next_token_nll(logits, b.ids, b.loss_mask); };
  const auto nan_loss = [&](const torch::Tensor& logits, size_t) {
    return masked_next_token_nll(logits, b.ids, b.loss_mask) * std::numeric_limits<float>::quiet_NaN();
  };
  const auto snapshot = [](Trainer& t) {
    std::vector<torch::Tensor> out;
    for (const auto& [name, tensor] : policy::state_tensors(t.model())) out.push_back(tensor.detach().clone());
    for (const auto& [name, tensor] : t.optimizer().state_tensors()) out.push_back(tensor.clone());
    return out;
  };
  const auto expect_bitwise_equal = [](const std::vector<torch::Tensor>& x, const std::vector<torch::Tensor>& y,
                                       const char* what) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(torch::equal(x[i], y[i])) << what << ": tensor " << i;
  };
  EXPECT_FALSE(trainer.step(mbs, loss).skipped);
  EXPECT_FALSE(twin.step(mbs, loss).skipped);
  const std::vector<torch::Tensor> before = snapshot(trainer);

  const StepStats bad = trainer.step(mbs, nan_loss);
  EXPECT_TRUE(bad.skipped);
  EXPECT_EQ(bad.step, 1);
  EXPECT_EQ(trainer.optimizer().steps(), 1);
  expect_bitwise_equal(snapshot(trainer), before, "after the skipped step");

  const StepStats next = trainer.step(mbs, loss);
  const StepStats twin_next = twin.step(mbs, loss);
  EXPECT_FALSE(next.skipped);
  EXPECT_EQ(next.step, 2);
  EXPECT_EQ(next.lr, twin_next.lr);  // the schedule did not advance for the skipped step
  EXPECT_EQ(next.loss, twin_next.loss);
  expect_bitwise_equal(snapshot(trainer), snapshot(twin), "the next step against the twin");
}

// The adapters stay attached between steps: generation after a LoRA step samples the trained
// adapters. Its per-token log-probabilities equal a full forward of the adapted model over the same
// tokens, and differ from the base model's.
TEST(Trainer, GenerationAfterALoraStepUsesTheUpdatedAdapters) {
  auto comm = dist::make_local_communicator();
  CausalLm model = tiny_model(14);
  LoraConfig config;
  config.rank = 4;
  LoraAdapters lora(model, config, 6);
  TrainerOptions o = test_options(false);
  o.schedule = LrSchedule{5e-2, 0, 10, 1.0};
  Trainer trainer(model, o, *comm, &lora);
  const Batch b = make_batch(2, 10, 8);
  const std::vector<MicroBatch> mbs{{b.ids, b.padding, b.loss_mask}};
  for (int i = 0; i < 3; ++i) {
    trainer.step(mbs, [&](const torch::Tensor& logits, size_t) { return masked_next_token_nll(logits, b.ids, b.loss_mask); });
  }
  ASSERT_TRUE(lora.attached());

  const std::vector<int64_t> prompt{5, 17, 42, 7, 99};
  policy::GenerationOptions gen;
  gen.max_new_tokens = 6;
  gen.sampling.temperature = 0;
  const policy::GenerationResult result = policy::generate(model, {prompt}, gen);
  ASSERT_EQ(result.sequences.size(), 1u);
  const policy::GeneratedSequence& seq = result.sequences[0];
  ASSERT_EQ(seq.tokens.size(), 6u);

  // log_softmax of a full pass over prompt + completion, at each completion token.
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), seq.tokens.begin(), seq.tokens.end());
  const torch::Tensor ids = torch::tensor(all, torch::kInt64).unsqueeze(0);
  const auto completion_logprobs = [&]() {
    torch::NoGradGuard no_grad;
    model->eval();
    const torch::Tensor logp = model->forward(ids)[0].to(torch::kFloat32).log_softmax(-1);
    std::vector<float> out;
    for (size_t i = 0; i < seq.tokens.size(); ++i) {
      out.push_back(logp[static_cast<int64_t>(prompt.size() + i - 1)][seq.tokens[i]].item<float>());
    }
    return out;
  };
  const std::vector<float> adapted = completion_logprobs();
  lora.remove();
  const std::vector<float> base = completion_logprobs();
  lora.apply();
  double largest_base_difference = 0;
  for (size_t i = 0; i < seq.tokens.size(); ++i) {
    EXPECT_NEAR(seq.model_logprobs[i], adapted[i], 1e-4) << "token " << i;
    largest_base_difference = std::max(largest_base_difference, std::abs(static_cast<double>(seq.model_logprobs[i] - base[i])));
  }
  EXPECT_GT(largest_base_difference, 1e-2) << "generation sampled the base model";
}

// The log-probs of `tokens` after `prompt` under the model as it is now (a plain full pass).
std::vector<float> completion_logprobs(CausalLm& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& tokens) {
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end());
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor logp = model->forward(torch::tensor(all, torch::kInt64).unsqueeze(0))[0].to(torch::kFloat32).log_softmax(-1);
  std::vector<float> out;
  for (size_t i = 0; i < tokens.size(); ++i) out.push_back(logp[static_cast<int64_t>(prompt.size() + i - 1)][tokens[i]].item<float>());
  return out;
}

// The job makes one GenerationEngine per trainer before its first step and keeps it: the engine
// must sample what the optimiser wrote (full weights, or LoRA adapters), not what it saw first.
void expect_engine_follows_steps(bool use_lora) {
  auto comm = dist::make_local_communicator();
  CausalLm model = tiny_model(21);
  std::unique_ptr<LoraAdapters> lora;
  if (use_lora) {
    LoraConfig config;
    config.rank = 4;
    lora = std::make_unique<LoraAdapters>(model, config, 3);
  }
  policy::EngineOptions engine_options;
  engine_options.kv_cache_bytes = 1 << 20;
  policy::GenerationEngine engine(model, engine_options);
  TrainerOptions o = test_options(false);
  o.schedule = LrSchedule{5e-2, 0, 10, 1.0};
  Trainer trainer(model, o, *comm, lora.get());
  const std::vector<int64_t> prompt{5, 17, 42, 7, 99};
  policy::GenerationOptions gen;
  gen.max_new_tokens = 6;
  gen.sampling.temperature = 1.0;
  gen.sampling.seed = 4;
  const auto sample = [&]() {
    const policy::GenerationResult r = engine.run({{prompt, 2, std::nullopt, std::nullopt}}, gen);
    EXPECT_EQ(r.sequences.size(), 2u);
    return r.sequences;
  };
  const auto before = sample();
  const Batch b = make_batch(2, 10, 8);
  const std::vector<MicroBatch> mbs{{b.ids, b.padding, b.loss_mask}};
  for (int i = 0; i < 3; ++i) {
    trainer.step(mbs, [&](const torch::Tensor& logits, size_t) { return masked_next_token_nll(logits, b.ids, b.loss_mask); });
  }
  const auto after = sample();
  double moved = 0;
  for (size_t k = 0; k < after.size(); ++k) {
    // The engine's log-probs are the updated model's, at the tokens it drew...
    const std::vector<float> now = completion_logprobs(model, prompt, after[k].tokens);
    ASSERT_EQ(now.size(), after[k].model_logprobs.size());
    for (size_t i = 0; i < now.size(); ++i) EXPECT_NEAR(after[k].model_logprobs[i], now[i], 1e-4) << "sample " << k << " token " << i;
    // ...and the model before the steps gave the tokens drawn then other log-probs.
    const std::vector<float> then = completion_logprobs(model, prompt, before[k].tokens);
    for (size_t i = 0; i < then.size(); ++i) moved = std::max(moved, std::abs(static_cast<double>(then[i] - before[k].model_logprobs[i])));
  }
  EXPECT_GT(moved, 1e-2) << "the steps did not change what the engine samples";
}

TEST(Trainer, AnEngineKeptAcrossStepsSamplesTheUpdatedWeights) { expect_engine_follows_steps(false); }
TEST(Trainer, AnEngineKeptAcrossStepsSamplesTheUpdatedAdapters) { expect_engine_follows_steps(true); }

}  // namespace
}  // namespace crl::rl
