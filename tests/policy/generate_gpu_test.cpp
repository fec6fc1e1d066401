// The generation engine on CUDA, at Qwen2-0.5B's shape against transformers: fp32 greedy decoding
// equal for 64 tokens; bf16 greedy equal to fp32's over the first 12 up to a near-tie, and its
// log-probabilities within twice transformers' own bf16-vs-fp32 drift (so an accumulation, RoPE or norm error in bf16 shows even
// where near-ties let tokens part); graphs captured once per bucket and recaptured when LoRA
// changes the model; a sequence's tokens the same alone and in a batch of 64.
//
// The 0.5B-shaped model and transformers' tokens come from tools/golden/make_generate_golden.py,
// run here with $CRL_GOLDEN_PYTHON (else the shared venv) into $CRL_QWEN2_0P5B_DIR (else a temp
// folder, reused when present). Run on the GPU machine: ctest -L gpu, or this program directly.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/subprocess.h"
#include "golden_python.h"
#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/lora.h"
#include "policy/model.h"
#include "policy/tiny_model.h"

namespace crl::policy {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(CRL_TEST_DATA_DIR) / "policy" / "models";

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)"

// The 0.5B-shaped model folder with transformers' golden tokens, made once per machine.
struct QwenGolden {
  fs::path dir;
  nlohmann::json golden;
  std::string skip_reason;
};

const QwenGolden& qwen_golden() {
  static const QwenGolden g = [] {
    QwenGolden out;
    const char* env_dir = std::getenv("CRL_QWEN2_0P5B_DIR");
    out.dir = env_dir && *env_dir ? fs::path(env_dir) : fs::temp_directory_path() / "crl_qwen2_0p5b_generate_golden";
    if (!fs::exists(out.dir / "generate_golden.json")) {
      const char* env_python = std::getenv("CRL_GOLDEN_PYTHON");
      const fs::path python = env_python && *env_python ? fs::path(env_python) : testing::golden_python();
      if (python.empty()) {
        out.skip_reason = "no Python with transformers (set CRL_GOLDEN_PYTHON)";
        return out;
      }
      fs::create_directories(out.dir);
      CommandOptions options;
      options.timeout = std::chrono::minutes(10);
      const CommandResult r = run_command({python.string(), std::string(CRL_SOURCE_DIR) + "/tools/golden/make_generate_golden.py",
                                           "--qwen2-0p5b", out.dir.string(), "--device", "cuda"}, options);
      if (!r.ok()) {
        out.skip_reason = "make_generate_golden.py failed: " + r.output.substr(r.output.size() > 2000 ? r.output.size() - 2000 : 0);
        return out;
      }
    }
    std::ifstream in(out.dir / "generate_golden.json");
    out.golden = nlohmann::json::parse(in);
    return out;
  }();
  return g;
}

#define QWEN_GOLDEN_OR_SKIP(name)                              \
  SKIP_WITHOUT_CUDA();                                         \
  const QwenGolden& name = qwen_golden();                      \
  if (!name.skip_reason.empty()) GTEST_SKIP() << name.skip_reason

TEST(GenerateQwen2Shape, Fp32GreedyEqualsTransformersFor64Tokens) {
  QWEN_GOLDEN_OR_SKIP(g);
  CausalLm model = load_causal_lm(g.dir, torch::kFloat32, torch::kCUDA);
  const auto prompts = g.golden["prompts"].get<std::vector<std::vector<int64_t>>>();
  const auto expected = g.golden["tokens"].get<std::vector<std::vector<int64_t>>>();
  const auto margins = g.golden["margins"].get<std::vector<std::vector<double>>>();
  GenerationOptions options;
  options.max_new_tokens = 64;
  options.sampling.temperature = 0;
  const auto result = generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& tokens = result.sequences[i].tokens;
    const auto parted = std::mismatch(tokens.begin(), tokens.end(), expected[i].begin());
    const size_t at = static_cast<size_t>(parted.first - tokens.begin());
    EXPECT_EQ(tokens, expected[i]) << "prompt " << i << " parts at token " << at
                                   << (at < margins[i].size() ? " (transformers' top-2 margin there " + std::to_string(margins[i][at]) + ")" : "");
  }
}

TEST(GenerateQwen2Shape, Bf16GreedyAndLogprobsWithinTransformersOwnDrift) {
  QWEN_GOLDEN_OR_SKIP(g);
  CausalLm model = load_causal_lm(g.dir, torch::kBFloat16, torch::kCUDA);
  const auto prompts = g.golden["prompts"].get<std::vector<std::vector<int64_t>>>();
  const auto expected = g.golden["tokens"].get<std::vector<std::vector<int64_t>>>();
  const auto hf32 = g.golden["fp32_logprobs"].get<std::vector<std::vector<double>>>();
  const auto hf16 = g.golden["bf16_logprobs"].get<std::vector<std::vector<double>>>();
  double hf_drift = 0;
  for (size_t i = 0; i < hf32.size(); ++i) {
    for (size_t t = 0; t < hf32[i].size(); ++t) hf_drift = std::max(hf_drift, std::abs(hf32[i][t] - hf16[i][t]));
  }
  ASSERT_GT(hf_drift, 0);
  // Teacher-forced: crl's bf16 forward over the fp32 greedy tokens.
  torch::NoGradGuard no_grad;
  double forced_drift = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> ids = prompts[i];
    ids.insert(ids.end(), expected[i].begin(), expected[i].end());
    const torch::Tensor logits = model->forward(torch::tensor(ids).view({1, -1}).to(torch::kCUDA))[0].to(torch::kFloat32);
    const torch::Tensor log_probs = logits.narrow(0, static_cast<int64_t>(prompts[i].size()) - 1, 64).log_softmax(-1).cpu();
    for (size_t t = 0; t < 64; ++t) {
      forced_drift = std::max(forced_drift, std::abs(log_probs[t][expected[i][t]].item<double>() - hf32[i][t]));
    }
  }
  RecordProperty("crl_bf16_logprob_drift", std::to_string(forced_drift));
  RecordProperty("hf_bf16_logprob_drift", std::to_string(hf_drift));
  EXPECT_LE(forced_drift, 2 * hf_drift) << "crl bf16 " << forced_drift << " vs transformers' own bf16 drift " << hf_drift;
  // The engine's decode path (paged cache, CUDA graph): the first 12 greedy tokens as transformers'
  // fp32 ones, their log-probabilities within the same bound.
  GenerationOptions options;
  options.max_new_tokens = 12;
  options.sampling.temperature = 0;
  const auto result = generate(model, prompts, options);
  EXPECT_TRUE(result.used_cuda_graph);
  const auto margins = g.golden["margins"].get<std::vector<std::vector<double>>>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& seq = result.sequences[i];
    ASSERT_EQ(seq.tokens.size(), 12u);
    for (size_t t = 0; t < seq.tokens.size(); ++t) {
      if (seq.tokens[t] != expected[i][t]) {
        // bf16 may part from fp32 only at a near-tie: where the fp32 top-2 margin is within bf16's error.
        EXPECT_LE(margins[i][t], 4 * hf_drift + 0.05) << "prompt " << i << " parts at step " << t << " with a clear fp32 winner";
        break;
      }
      EXPECT_LE(std::abs(seq.model_logprobs[t] - hf32[i][t]), 2 * hf_drift + 1e-3) << "prompt " << i << " step " << t;
    }
  }
}

TEST(GenerateCudaEngine, GraphsAreCapturedOncePerBucketAndFollowLora) {
  SKIP_WITHOUT_CUDA();
  CausalLm model = load_causal_lm(kModels / "qwen2_gqa2_tied", torch::kFloat32, torch::kCUDA);
  GenerationEngine engine(model, EngineOptions{});
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.sampling.temperature = 0.8;
  options.sampling.seed = 5;
  const std::vector<GenerationRequest> requests = {{{5, 17, 42, 9, 100, 3, 77}, 4, std::nullopt, std::nullopt},
                                                   {{11, 12}, 3, std::nullopt, 25}};
  const auto first = engine.run(requests, options);
  const int64_t captured = engine.graphs_captured();
  EXPECT_GT(captured, 0);
  const auto second = engine.run(requests, options);
  EXPECT_EQ(engine.graphs_captured(), captured) << "a second run of the same shapes captured again";
  options.use_cuda_graph = false;
  const auto eager = engine.run(requests, options);
  options.use_cuda_graph = true;
  for (size_t i = 0; i < first.sequences.size(); ++i) {
    EXPECT_EQ(first.sequences[i].tokens, second.sequences[i].tokens);
    EXPECT_EQ(first.sequences[i].tokens, eager.sequences[i].tokens) << "sequence " << i;
  }
  {
    LoraConfig config;
    config.rank = 4;
    LoraAdapters lora(model, config, 3);
    testing::randomize_lora_b(lora, 0.5);
    torch::NoGradGuard no_grad;
    const auto adapted = engine.run(requests, options);
    options.use_cuda_graph = false;
    const auto adapted_eager = engine.run(requests, options);
    options.use_cuda_graph = true;
    bool changed = false;
    for (size_t i = 0; i < first.sequences.size(); ++i) {
      EXPECT_EQ(adapted.sequences[i].tokens, adapted_eager.sequences[i].tokens) << "graphs kept the model without LoRA";
      changed |= adapted.sequences[i].tokens != first.sequences[i].tokens;
    }
    EXPECT_TRUE(changed);
  }
  const auto detached = engine.run(requests, options);
  for (size_t i = 0; i < first.sequences.size(); ++i) EXPECT_EQ(detached.sequences[i].tokens, first.sequences[i].tokens);
}

TEST(GenerateCudaEngine, SequenceAloneEqualsSequenceInABatchOf64) {
  SKIP_WITHOUT_CUDA();
  CausalLm model = load_causal_lm(kModels / "llama3_gqa4_rope_llama3", torch::kFloat32, torch::kCUDA);
  GenerationOptions options;
  options.max_new_tokens = 48;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 21;
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < 64; ++i) {
    std::vector<int64_t> p;
    for (int64_t t = 0; t < 1 + (i * 11) % 53; ++t) p.push_back((i * 31 + t * 17 + 3) % model->config().vocab_size);
    prompts.push_back(p);
  }
  const auto batch = generate(model, prompts, options);
  GenerationEngine engine(model, EngineOptions{});
  for (int64_t i : {0, 17, 63}) {
    const auto alone = engine.run({{prompts[static_cast<size_t>(i)], 1, i, std::nullopt}}, options);
    EXPECT_EQ(alone.sequences[0].tokens, batch.sequences[static_cast<size_t>(i)].tokens) << "sequence " << i;
  }
}

// max|a - b| / max|b|, as the model tests measure logits.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor b32 = b.to(torch::kFloat32).cpu();
  return ((a.to(torch::kFloat32).cpu() - b32).abs().max() / b32.abs().max()).item<double>();
}

class FusedKernels : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedKernels, MatchTheAtenOpsInFp32AndBf16AndGiveTheSameGreedyTokens) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int64_t> prompt = {5, 17, 42, 9, 100, 3, 77, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    CausalLm model = load_causal_lm(kModels / GetParam(), dtype, torch::kCUDA);
    torch::NoGradGuard no_grad;
    const torch::Tensor ids = torch::tensor(prompt).view({2, -1}).to(torch::kCUDA);
    const torch::Tensor reference = model->forward(ids);
    torch::Tensor fused;
    {
      const FusedInferenceKernels on(true);
      fused = model->forward(ids);
    }
    const double error = relative_error(fused, reference);
    RecordProperty(dtype == torch::kFloat32 ? "fp32_rel_err" : "bf16_rel_err", std::to_string(error));
    // Only RMSNorm's order of summation differs: fp32 agrees to rounding, bf16 to a few bf16 steps.
    EXPECT_LE(error, dtype == torch::kFloat32 ? 1e-5 : 2e-2) << GetParam();
    if (dtype != torch::kFloat32) continue;
    EngineOptions plain, with_fused;
    with_fused.fused_kernels = true;
    GenerationOptions options;
    options.max_new_tokens = 32;
    options.sampling.temperature = 0;
    const auto a = GenerationEngine(model, plain).run({{prompt, 2, std::nullopt, std::nullopt}}, options);
    const auto b = GenerationEngine(model, with_fused).run({{prompt, 2, std::nullopt, std::nullopt}}, options);
    EXPECT_EQ(a.sequences[0].tokens, b.sequences[0].tokens);
    for (size_t t = 0; t < a.sequences[0].tokens.size(); ++t) {
      EXPECT_NEAR(a.sequences[0].model_logprobs[t], b.sequences[0].model_logprobs[t], 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenModels, FusedKernels, ::testing::Values("qwen2_gqa2_tied", "llama_mqa_bias_linear", "llama_yarn"));

}  // namespace
}  // namespace crl::policy
