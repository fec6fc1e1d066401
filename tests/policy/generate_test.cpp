// Generation: reproducible from the seed, cached decoding consistent with a full forward pass,
// log-probabilities as documented, warpers as transformers defines them, stop tokens and strings,
// a sequence's tokens independent of its batch-mates, shared prompt blocks, continuous batching
// under a small KV budget, LoRA in generation, and greedy decoding against transformers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "policy/sampling.h"
#include "policy/tiny_model.h"

namespace crl::policy {
namespace {

// The models here are tiny: one intra-op thread is fastest and keeps a busy CI machine from
// stalling in OpenMP spin-waits.
const bool kSingleThreaded = (torch::set_num_threads(1), true);

const std::filesystem::path kModels = std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models";

CausalLm tiny_model(const std::string& name = "qwen2_gqa2_tied") {
  return load_causal_lm(kModels / name, torch::kFloat32, torch::kCPU);
}

const std::vector<std::vector<int64_t>> kPrompts = {{5, 17, 42, 9, 100, 3, 77}, {11, 12}, {250, 1, 2, 3}};

// Tokens as "<id>" text: enough to exercise stop strings without a tokenizer.
std::string toy_decode(const std::vector<int64_t>& ids) {
  std::string text;
  for (int64_t id : ids) text += "<" + std::to_string(id) + ">";
  return text;
}

// Full-forward log_softmax at each generated position of prompt + completion (no cache, no padding).
torch::Tensor full_forward_log_probs(CausalLm& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& completion) {
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), completion.begin(), completion.end());
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(torch::tensor(ids, torch::kInt64).view({1, -1}))[0];
  return logits.narrow(0, static_cast<int64_t>(prompt.size()) - 1, static_cast<int64_t>(completion.size())).log_softmax(-1);
}

TEST(Generate, SameSeedSameTokensOtherSeedOtherTokens) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 42;
  const auto a = generate(model, kPrompts, options);
  const auto b = generate(model, kPrompts, options);
  options.sampling.seed = 43;
  const auto c = generate(model, kPrompts, options);
  bool any_difference = false;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens);
    EXPECT_EQ(a.sequences[i].logprobs, b.sequences[i].logprobs);
    EXPECT_EQ(a.sequences[i].tokens.size(), 12u);
    any_difference |= a.sequences[i].tokens != c.sequences[i].tokens;
  }
  EXPECT_TRUE(any_difference);
}

TEST(Generate, GreedyCachedDecodingEqualsArgmaxOfFullForward) {
  CausalLm model = tiny_model("llama3_gqa4_rope_llama3");
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.sampling.temperature = 0;
  const auto result = generate(model, kPrompts, options);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const auto& seq = result.sequences[i];
    ASSERT_EQ(seq.tokens.size(), 10u);
    const torch::Tensor log_probs = full_forward_log_probs(model, kPrompts[i], seq.tokens);
    for (size_t t = 0; t < seq.tokens.size(); ++t) {
      EXPECT_EQ(log_probs[t].argmax().item<int64_t>(), seq.tokens[t]) << "prompt " << i << " step " << t;
      EXPECT_NEAR(seq.model_logprobs[t], log_probs[t][seq.tokens[t]].item<float>(), 1e-4);
      EXPECT_EQ(seq.logprobs[t], 0.0f);  // greedy: the sampling distribution is a point mass
    }
    EXPECT_EQ(seq.finish_reason, FinishReason::kLength);
  }
}

TEST(Generate, SampledLogprobsAreUnderTheFilteredTemperedDistribution) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 8;
  options.sampling.temperature = 0.7;
  options.sampling.top_k = 20;
  options.sampling.top_p = 0.9;
  options.sampling.seed = 3;
  const auto result = generate(model, kPrompts, options);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const auto& seq = result.sequences[i];
    const torch::Tensor model_log_probs = full_forward_log_probs(model, kPrompts[i], seq.tokens);
    for (size_t t = 0; t < seq.tokens.size(); ++t) {
      const torch::Tensor filtered = filter_logits(model_log_probs[t].unsqueeze(0), options.sampling).log_softmax(-1)[0];
      const float expected = filtered[seq.tokens[t]].item<float>();
      ASSERT_TRUE(std::isfinite(expected)) << "sampled a token the filters removed";
      EXPECT_NEAR(seq.logprobs[t], expected, 1e-4);
      EXPECT_NEAR(seq.model_logprobs[t], model_log_probs[t][seq.tokens[t]].item<float>(), 1e-4);
      EXPECT_LE(seq.logprobs[t], 0.0f);
    }
  }
}

TEST(Generate, StopTokenEndsTheSequenceAndIsKept) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 10;
  options.sampling.temperature = 0;
  const auto free_run = generate(model, {kPrompts[0]}, options);
  const int64_t stop = free_run.sequences[0].tokens[3];
  options.stop_token_ids = {stop};
  const auto stopped = generate(model, {kPrompts[0]}, options);
  const auto& tokens = stopped.sequences[0].tokens;
  const auto first = std::find(free_run.sequences[0].tokens.begin(), free_run.sequences[0].tokens.end(), stop);
  const size_t expected_length = static_cast<size_t>(first - free_run.sequences[0].tokens.begin()) + 1;
  ASSERT_EQ(tokens.size(), expected_length);
  EXPECT_EQ(tokens.back(), stop);
  EXPECT_EQ(stopped.sequences[0].finish_reason, FinishReason::kStopToken);
  EXPECT_EQ(stopped.sequences[0].logprobs.size(), expected_length);
}

TEST(Generate, StopStringCutsTokensAndText) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 0;
  const auto free_run = generate(model, kPrompts, options, toy_decode);
  const auto& reference = free_run.sequences[1].tokens;
  // Stop at the text of tokens 4 and 5 together, which first appears there (or earlier).
  const std::string stop = toy_decode({reference[4], reference[5]});
  options.stop_strings = {stop};
  const auto result = generate(model, kPrompts, options, toy_decode);
  const auto& seq = result.sequences[1];
  EXPECT_EQ(seq.finish_reason, FinishReason::kStopString);
  ASSERT_LE(seq.tokens.size(), 6u);
  EXPECT_TRUE(std::equal(seq.tokens.begin(), seq.tokens.end(), reference.begin()));
  EXPECT_NE(toy_decode(seq.tokens).find(stop), std::string::npos);
  EXPECT_TRUE(seq.text.ends_with(stop)) << seq.text;
  EXPECT_EQ(seq.text, toy_decode(seq.tokens));  // toy tokens end exactly at the stop string
  // A stop string without a decoder is refused up front.
  EXPECT_THROW(generate(model, kPrompts, options), InputError);
}

TEST(Generate, RejectsBadInputs) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  EXPECT_THROW(generate(model, {{1, 2}, {}}, options), InputError);
  EXPECT_THROW(generate(model, {{1, 99999}}, options), InputError);
  options.max_new_tokens = 0;
  EXPECT_THROW(generate(model, {{1}}, options), InputError);
  options.max_new_tokens = 4;
  options.sampling.top_p = 0;
  EXPECT_THROW(generate(model, {{1}}, options), InputError);
  options.sampling.top_p = 1;
  options.sampling.temperature = -1;
  EXPECT_THROW(generate(model, {{1}}, options), InputError);
}

TEST(Sampling, TopPAndTopKFollowTransformersWarpers) {
  const torch::Tensor probs = torch::tensor({0.5f, 0.3f, 0.15f, 0.05f});
  const torch::Tensor logits = probs.log().view({1, 4});
  auto kept = [&](SamplingOptions o) {
    const torch::Tensor f = filter_logits(logits, o)[0];
    std::vector<bool> k;
    for (int i = 0; i < 4; ++i) k.push_back(std::isfinite(f[i].item<float>()));
    return k;
  };
  SamplingOptions o;
  o.top_p = 0.8;  // cumulative ascending 0.05, 0.2, 0.5, 1.0: drop those <= 0.2
  EXPECT_EQ(kept(o), (std::vector<bool>{true, true, false, false}));
  o.top_p = 0.85;  // drop those <= 0.15
  EXPECT_EQ(kept(o), (std::vector<bool>{true, true, true, false}));
  o.top_p = 0.01;  // the most likely token always stays
  EXPECT_EQ(kept(o), (std::vector<bool>{true, false, false, false}));
  o = SamplingOptions{};
  o.top_k = 2;
  EXPECT_EQ(kept(o), (std::vector<bool>{true, true, false, false}));
  o.temperature = 2.0;
  EXPECT_NEAR(filter_logits(logits, o)[0][0].item<float>(), std::log(0.5f) / 2, 1e-6);
}

TEST(Sampling, CounterUniformIsUniformAndDrawsMatchSoftmax) {
  const torch::Tensor keys = sequence_keys(11, 50000, torch::kCPU);
  const torch::Tensor u = counter_uniform(keys, torch::tensor({int64_t{5}}));
  EXPECT_GT(u.min().item<float>(), 0.0f);
  EXPECT_LT(u.max().item<float>(), 1.0f);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.005);
  EXPECT_NEAR(u.var().item<double>(), 1.0 / 12, 0.002);
  // Same inputs, same numbers; another step, other numbers; per-row steps address rows alone.
  EXPECT_TRUE(torch::equal(u, counter_uniform(keys, torch::tensor({int64_t{5}}))));
  EXPECT_FALSE(torch::equal(u, counter_uniform(keys, torch::tensor({int64_t{6}}))));
  const torch::Tensor steps = torch::arange(50000, torch::kInt64);
  EXPECT_EQ(counter_uniform(keys, steps)[5].item<float>(), counter_uniform(keys[5].view({1}), torch::tensor({int64_t{5}}))[0].item<float>());
  // The host's bits are the device's numbers.
  std::vector<int64_t> bits;
  for (int64_t b = 0; b < 1000; ++b) bits.push_back(counter_bits(keys[b].item<int64_t>(), b * 7919));
  EXPECT_TRUE(torch::equal(uniform_from_bits(torch::tensor(bits)),
                           counter_uniform(keys.narrow(0, 0, 1000), torch::arange(1000, torch::kInt64) * 7919)));
  // Along the steps of one sequence, uniform too.
  const torch::Tensor along = counter_uniform(keys[3].view({1}).expand({50000}).contiguous(), steps);
  EXPECT_NEAR(along.mean().item<double>(), 0.5, 0.005);
  // Draw 4000 times from a fixed distribution (1000 steps x 4 sequences): frequencies match.
  const torch::Tensor probs = torch::tensor({0.5f, 0.25f, 0.15f, 0.1f});
  const torch::Tensor logits = probs.log().view({1, 4}).expand({4, 4}).contiguous();
  const torch::Tensor four = keys.narrow(0, 0, 4);
  std::vector<int> counts(4, 0);
  SamplingOptions o;
  for (int64_t step = 0; step < 1000; ++step) {
    const auto s = sample_tokens(logits, o, four, torch::tensor({step}));
    for (int b = 0; b < 4; ++b) counts[s.tokens[b].item<int64_t>()]++;
    EXPECT_NEAR(s.logprobs[0].item<float>(), probs[s.tokens[0].item<int64_t>()].log().item<float>(), 1e-5);
  }
  for (int v = 0; v < 4; ++v) {
    const double expected = 4000 * probs[v].item<double>();
    EXPECT_NEAR(counts[v], expected, 5 * std::sqrt(expected)) << "token " << v;
  }
  // A token the filters removed is never drawn.
  o.top_k = 2;
  for (int64_t step = 0; step < 200; ++step) {
    const auto s = sample_tokens(logits, o, four, torch::tensor({step}));
    EXPECT_LT(s.tokens.max().item<int64_t>(), 2);
  }
}

TEST(BlockAllocator, CountsReferencesAndReservations) {
  BlockAllocator blocks(4);  // 1, 2, 3 usable; 0 is scratch
  EXPECT_EQ(blocks.free_blocks(), 3);
  const int64_t a = blocks.allocate();
  EXPECT_NE(a, 0);
  blocks.retain(a);
  blocks.release(a);
  EXPECT_EQ(blocks.free_blocks(), 2);  // still held once
  blocks.release(a);
  EXPECT_EQ(blocks.free_blocks(), 3);
  EXPECT_THROW(blocks.release(a), Error);
  blocks.reserve(2);
  EXPECT_EQ(blocks.available(), 1);
  EXPECT_THROW(blocks.reserve(2), Error);
  blocks.unreserve(2);
  EXPECT_EQ(blocks.available(), 3);
  for (int i = 0; i < 3; ++i) blocks.allocate();
  EXPECT_THROW(blocks.allocate(), Error);
}

// A KV pool the tiny model's tests fill by far (the default, 1 GiB, takes a while to zero).
EngineOptions test_engine() {
  EngineOptions options;
  options.kv_cache_bytes = int64_t{8} << 20;
  return options;
}

// Prompts of several lengths (block boundaries included) for the batch tests.
std::vector<std::vector<int64_t>> mixed_prompts(int64_t count, int64_t vocab) {
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> p;
    for (int64_t t = 0; t < 1 + (i * 7) % 37; ++t) p.push_back((i * 31 + t * 17 + 3) % vocab);
    prompts.push_back(p);
  }
  return prompts;
}

TEST(Generate, SequenceAloneEqualsSequenceInABatchOf64) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 24;
  options.sampling.temperature = 0.9;
  options.sampling.top_k = 40;
  options.sampling.seed = 1234;
  auto prompts = mixed_prompts(64, model->config().vocab_size);
  prompts[0] = kPrompts[0];
  const auto batch = generate(model, prompts, options);
  const auto alone = generate(model, {kPrompts[0]}, options);
  EXPECT_EQ(batch.sequences[0].tokens, alone.sequences[0].tokens);
  for (size_t t = 0; t < alone.sequences[0].tokens.size(); ++t) {
    EXPECT_NEAR(batch.sequences[0].logprobs[t], alone.sequences[0].logprobs[t], 1e-5);
  }
  // A sequence further down the batch, alone with its key (first_sequence_id) as in the batch.
  GenerationEngine engine(model, test_engine());
  const auto single = engine.run({{prompts[37], 1, 37}}, options);
  EXPECT_EQ(batch.sequences[37].tokens, single.sequences[0].tokens);
  EXPECT_EQ(batch.peak_running, 64);
}

TEST(Generate, GroupSamplesShareOnePrefillAndEqualSeparateRuns) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 30;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 9;
  // 21 tokens: the cached 20 fill one 16-slot block and part of a second, which each sample copies.
  std::vector<int64_t> prompt;
  for (int64_t t = 0; t < 21; ++t) prompt.push_back((t * 13 + 5) % model->config().vocab_size);
  GenerationEngine engine(model, test_engine());
  const auto group = engine.run({{prompt, 8, std::nullopt}}, options);
  ASSERT_EQ(group.sequences.size(), 8u);
  EXPECT_EQ(group.prefill_tokens, 20);  // one prefill for the eight samples
  bool any_difference = false;
  for (int64_t s = 0; s < 8; ++s) {
    GenerationEngine fresh(model, test_engine());
    const auto single = fresh.run({{prompt, 1, s}}, options);
    EXPECT_EQ(group.sequences[s].tokens, single.sequences[0].tokens) << "sample " << s;
    any_difference |= group.sequences[s].tokens != group.sequences[0].tokens;
  }
  EXPECT_TRUE(any_difference);  // the samples draw from their own keys
  // Every block is back in the pool.
  EXPECT_EQ(engine.free_blocks(), engine.usable_blocks());
}

TEST(Generate, ContinuousBatchingUnderASmallBudgetAdmitsAsOthersFinish) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 20;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 77;
  const auto prompts = mixed_prompts(6, model->config().vocab_size);
  // Stop at a frequent token so that lengths vary.
  const auto free_run = generate(model, prompts, options);
  std::map<int64_t, int> frequency;
  for (const auto& s : free_run.sequences) for (int64_t t : s.tokens) frequency[t]++;
  options.stop_token_ids = {std::max_element(frequency.begin(), frequency.end(), [](auto& a, auto& b) { return a.second < b.second; })->first};
  const auto roomy = generate(model, prompts, options);
  // Room for the longest prompt's sequence (36 tokens, 20 new: 3 prompt blocks, 2 of its own) and
  // the scratch block: a few sequences at a time.
  EngineOptions small;
  small.kv_cache_bytes = 6 * PagedKvCache::bytes_per_block(model->config(), small.block_size, model->dtype());
  GenerationEngine engine(model, small);
  std::vector<GenerationRequest> requests;
  for (const auto& p : prompts) requests.push_back({p, 1, std::nullopt});
  const auto tight = engine.run(requests, options);
  int64_t tokens = 0;
  bool varied = false;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(tight.sequences[i].tokens, roomy.sequences[i].tokens) << "sequence " << i;
    tokens += static_cast<int64_t>(tight.sequences[i].tokens.size());
    varied |= tight.sequences[i].tokens.size() != tight.sequences[0].tokens.size();
  }
  EXPECT_TRUE(varied);
  EXPECT_LT(tight.peak_running, static_cast<int64_t>(prompts.size()));
  EXPECT_EQ(engine.free_blocks(), engine.usable_blocks());
  EXPECT_GT(tight.decode_steps, roomy.decode_steps);
  // Every decoded row produced a kept token: no steps for finished sequences.
  EXPECT_EQ(tight.decoded_rows, tokens);
  EXPECT_EQ(roomy.decoded_rows, tokens);
  // A budget that cannot hold one sequence is refused up front, naming the fix.
  EngineOptions tiny_budget;
  tiny_budget.kv_cache_bytes = 3 * PagedKvCache::bytes_per_block(model->config(), tiny_budget.block_size, model->dtype());
  GenerationEngine cramped(model, tiny_budget);
  EXPECT_THROW(cramped.run(requests, options), InputError);
}

// A request is checked against the KV budget by its own token limit, not the run's (the largest):
// a long prompt with a short limit fits beside a short prompt with a long one (crl generate
// --batch-file, issue 43).
TEST(Generate, EachRequestIsCheckedByItsOwnLimit) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.sampling.temperature = 0;
  // 16-token blocks: 41 prompt tokens and 4 new need 4 blocks (6 at the run's 40); 2 and 40 need 4.
  EngineOptions four_blocks;
  four_blocks.kv_cache_bytes = 5 * PagedKvCache::bytes_per_block(model->config(), four_blocks.block_size, model->dtype());
  GenerationEngine engine(model, four_blocks);
  ASSERT_EQ(engine.usable_blocks(), 4);
  std::vector<int64_t> long_prompt;
  for (int64_t i = 0; i < 41; ++i) long_prompt.push_back(1 + i * 7 % 300);
  const std::vector<GenerationRequest> requests = {{long_prompt, 1, std::nullopt, 4}, {{11, 12}, 1, std::nullopt, 40}};
  const auto result = engine.run(requests, options);
  ASSERT_EQ(result.sequences.size(), 2u);
  EXPECT_EQ(result.sequences[0].tokens.size(), 4u);
  EXPECT_EQ(result.sequences[1].tokens.size(), 40u);
  // Its own limit still counts: the long prompt at 40 new tokens does not fit.
  try {
    engine.run({{long_prompt, 1, std::nullopt, 40}}, options);
    ADD_FAILURE() << "a request needing 6 of 4 blocks ran";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("with max_new_tokens 40 needs 6 KV blocks; the cache holds 4"), std::string::npos) << e.what();
  }
}

TEST(Generate, LoraIsActiveAndMatchesTheTrainingForward) {
  CausalLm model = tiny_model();
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 0;
  const auto base = generate(model, kPrompts, options);
  LoraConfig config;
  config.rank = 4;
  LoraAdapters lora(model, config, 3);
  testing::randomize_lora_b(lora, 0.5);
  const auto adapted = generate(model, kPrompts, options);
  bool changed = false;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const auto& seq = adapted.sequences[i];
    changed |= seq.tokens != base.sequences[i].tokens;
    // The training forward: train mode (dropout 0), whole sequence, no cache.
    model->train();
    const torch::Tensor log_probs = full_forward_log_probs(model, kPrompts[i], seq.tokens);
    model->eval();
    // The decode step (one row against the cache) and the training forward (the whole sequence)
    // sum their products in different orders: with B drawn at 0.5 the logits are large, and
    // MKL's SSE4.2 kernels (what it picks on some CI CPUs) put the two 1e-4 apart, so the chosen
    // token is checked to be the training forward's best up to that, not bitwise its argmax.
    constexpr float kTolerance = 5e-4f;
    for (size_t t = 0; t < seq.tokens.size(); ++t) {
      const float chosen = log_probs[t][seq.tokens[t]].item<float>();
      EXPECT_GE(chosen, log_probs[t].max().item<float>() - kTolerance) << "prompt " << i << " step " << t;
      EXPECT_NEAR(seq.model_logprobs[t], chosen, kTolerance) << "prompt " << i << " step " << t;
    }
  }
  EXPECT_TRUE(changed) << "LoRA made no difference: is it applied in generation?";
}

class GoldenGreedy : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenGreedy, Fp32GreedyEqualsTransformersFor64Tokens) {
  std::ifstream in(kModels / GetParam() / "generate_golden.json");
  ASSERT_TRUE(in) << "run tools/golden/make_generate_golden.py";
  const nlohmann::json golden = nlohmann::json::parse(in);
  CausalLm model = tiny_model(GetParam());
  GenerationOptions options;
  options.max_new_tokens = 64;
  options.sampling.temperature = 0;
  const auto prompts = golden["prompts"].get<std::vector<std::vector<int64_t>>>();
  const auto expected = golden["tokens"].get<std::vector<std::vector<int64_t>>>();
  const auto result = generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(result.sequences[i].tokens, expected[i]) << GetParam() << " prompt " << i;
}

INSTANTIATE_TEST_SUITE_P(Transformers, GoldenGreedy,
                         ::testing::Values("qwen2_gqa2_tied", "qwen2_mha_untied", "llama3_gqa4_rope_llama3",
                                           "llama_mqa_bias_linear", "llama_yarn"));

}  // namespace
}  // namespace crl::policy
