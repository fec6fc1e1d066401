// The policy model and generation on CUDA: fp32 logits against transformers' (<= 1e-4), bf16 logits
// within twice transformers' own bf16-vs-fp32 drift, and the CUDA-graph decode equal to the eager one.
// Run on the GPU machine (ctest -L gpu). The bf16 bound comes from the golden files' golden.json
// (transformers on the CPU) or, when CRL_MODEL_GOLDEN_CUDA_DIR names the output of
// `make_model_golden.py --device cuda --reuse-models`, from transformers' own bf16 run on the GPU.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "policy/generate.h"
#include "policy/model.h"
#include "policy/safetensors.h"

namespace crl::policy {
namespace {

const std::filesystem::path kModels = std::filesystem::path(CRL_TEST_DATA_DIR) / "policy" / "models";

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)"

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor b32 = b.to(torch::kFloat32).cpu();
  return ((a.to(torch::kFloat32).cpu() - b32).abs().max() / b32.abs().max()).item<double>();
}

// transformers' own max relative bf16-vs-fp32 difference for a model (GPU run if available).
double hf_bf16_drift(const std::string& name) {
  double drift = 0;
  std::vector<std::filesystem::path> files = {kModels / name / "golden.json"};
  if (const char* cuda_dir = std::getenv("CRL_MODEL_GOLDEN_CUDA_DIR")) {
    files.push_back(std::filesystem::path(cuda_dir) / name / "golden_cuda.json");
  }
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) continue;
    drift = std::max(drift, nlohmann::json::parse(in)["hf_bf16_max_rel_err"].get<double>());
  }
  return drift;
}

class GoldenModelCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModelCuda, Fp32AndBf16LogitsMatchTransformers) {
  SKIP_WITHOUT_CUDA();
  const SafetensorsFile golden(kModels / GetParam() / "golden.safetensors");
  const torch::Tensor ids = golden.tensor("input_ids").to(torch::kCUDA);
  const torch::Tensor expected = golden.tensor("logits_fp32");
  torch::NoGradGuard no_grad;
  CausalLm fp32 = load_causal_lm(kModels / GetParam(), torch::kFloat32, torch::kCUDA);
  EXPECT_LE(relative_error(fp32->forward(ids), expected), 1e-4);
  CausalLm bf16 = load_causal_lm(kModels / GetParam(), torch::kBFloat16, torch::kCUDA);
  const double drift = hf_bf16_drift(GetParam());
  ASSERT_GT(drift, 0) << "golden.json lacks hf_bf16_max_rel_err";
  const double ours = relative_error(bf16->forward(ids), expected);
  RecordProperty("crl_bf16_rel_err", std::to_string(ours));
  RecordProperty("hf_bf16_rel_err", std::to_string(drift));
  EXPECT_LE(ours, 2 * drift) << "crl bf16 " << ours << " vs transformers' own bf16 drift " << drift;
}

INSTANTIATE_TEST_SUITE_P(Transformers, GoldenModelCuda,
                         ::testing::Values("qwen2_gqa2_tied", "qwen2_mha_untied", "llama3_gqa4_rope_llama3",
                                           "llama_mqa_bias_linear", "llama_yarn"));

TEST(GenerateCuda, CudaGraphDecodeEqualsEagerAndIsReproducible) {
  SKIP_WITHOUT_CUDA();
  CausalLm model = load_causal_lm(kModels / "llama3_gqa4_rope_llama3", torch::kFloat32, torch::kCUDA);
  const std::vector<std::vector<int64_t>> prompts = {{5, 17, 42, 9, 100, 3, 77}, {11, 12}, {250, 1, 2, 3}};
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.sampling.temperature = 0.8;
  options.sampling.top_p = 0.95;
  options.sampling.seed = 17;
  options.use_cuda_graph = true;
  const auto graphed = generate(model, prompts, options);
  EXPECT_TRUE(graphed.used_cuda_graph);
  const auto again = generate(model, prompts, options);
  options.use_cuda_graph = false;
  const auto eager = generate(model, prompts, options);
  EXPECT_FALSE(eager.used_cuda_graph);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(graphed.sequences[i].tokens, again.sequences[i].tokens);
    EXPECT_EQ(graphed.sequences[i].tokens, eager.sequences[i].tokens) << "prompt " << i;
    for (size_t t = 0; t < graphed.sequences[i].logprobs.size() && t < eager.sequences[i].logprobs.size(); ++t) {
      EXPECT_NEAR(graphed.sequences[i].logprobs[t], eager.sequences[i].logprobs[t], 1e-4);
    }
  }
}

TEST(GenerateCuda, Bf16GreedyMatchesFullForwardArgmax) {
  SKIP_WITHOUT_CUDA();
  CausalLm model = load_causal_lm(kModels / "qwen2_gqa2_tied", torch::kBFloat16, torch::kCUDA);
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  GenerationOptions options;
  options.max_new_tokens = 6;
  options.sampling.temperature = 0;
  const auto result = generate(model, {prompt}, options);
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), result.sequences[0].tokens.begin(), result.sequences[0].tokens.end());
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(torch::tensor(ids).view({1, -1}).to(torch::kCUDA))[0].to(torch::kFloat32).cpu();
  int agree = 0;
  for (size_t t = 0; t < result.sequences[0].tokens.size(); ++t) {
    agree += logits[prompt.size() - 1 + t].argmax().item<int64_t>() == result.sequences[0].tokens[t];
  }
  // bf16 cached and uncached passes round differently; near-ties may flip, most steps must agree.
  EXPECT_GE(agree, 5);
}

}  // namespace
}  // namespace crl::policy
