// crl's inference kernels (lib/policy/inference_kernels_cuda.cu) against the ATen path of the same
// forward on the GPU: one decode step over a paged cache whose blocks are scattered, for head
// layouts from MHA to 16 query heads per kv head, head_dim 8 to 128 (and 12, which the attention
// kernel does not take: the fallback), sequences from 1 key to several key chunks, 1 to 12 rows (the
// small-rows projections up to their limits, cuBLAS beyond; the gate and up projections writing
// silu(gate) * up themselves), fp32 and bf16; and programmatic dependent launch on and off.
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "policy/config.h"
#include "policy/engine.h"
#include "policy/inference_kernels_cuda.h"
#include "policy/kv_cache.h"
#include "policy/model.h"

namespace crl::policy {
namespace {

namespace fs = std::filesystem;
const fs::path kModels = fs::path(CRL_TEST_DATA_DIR) / "policy" / "models";

struct HeadLayout {
  int64_t heads, kv_heads, head_dim, hidden;
};

void PrintTo(const HeadLayout& l, std::ostream* os) {
  *os << l.heads << " heads, " << l.kv_heads << " kv heads, head_dim " << l.head_dim << ", hidden " << l.hidden;
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor b32 = b.to(torch::kFloat32).cpu();
  return ((a.to(torch::kFloat32).cpu() - b32).abs().max() / b32.abs().max()).item<double>();
}

class PagedDecodeStep : public ::testing::TestWithParam<HeadLayout> {};

TEST_P(PagedDecodeStep, LogitsWithCrlsKernelsMatchTheAtenPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)";
  const HeadLayout layout = GetParam();
  ModelConfig config = load_model_config(kModels / "qwen2_gqa2_tied");  // q/k/v with bias, o and MLP without
  config.num_attention_heads = layout.heads;
  config.num_key_value_heads = layout.kv_heads;
  config.head_dim = layout.head_dim;
  config.hidden_size = layout.hidden;
  config.intermediate_size = 3 * layout.hidden;
  config.max_position_embeddings = 4096;
  // Keys each row sees: one key, within a block, a chunk's edge (64) and one past it, several chunks.
  const std::vector<int64_t> all_lengths = {300, 1, 37, 64, 65, 2, 16, 17, 128, 129, 200, 255};
  constexpr int64_t kBlockSize = 16;
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    CausalLm model(config);
    init_weights(model, 11);
    model->to(torch::kCUDA, dtype);
    model->eval();
    torch::NoGradGuard no_grad;
    PagedKvCache cache = PagedKvCache::allocate(config, 128, kBlockSize, dtype, torch::kCUDA);
    for (size_t l = 0; l < cache.keys.size(); ++l) {  // the earlier tokens' keys and values
      cache.keys[l].normal_();
      cache.values[l].normal_();
    }
    for (const int64_t rows : {1, 2, 3, 5, 8, 12}) {
      const std::vector<int64_t> lengths(all_lengths.begin(), all_lengths.begin() + rows);
      // Blocks in a shuffled order, so that no row's blocks are adjacent; two spare table columns
      // (block 0, never read: as the engine pads its tables to the bucket's width).
      std::vector<int64_t> free_blocks(cache.num_blocks - 1);
      std::iota(free_blocks.begin(), free_blocks.end(), 1);
      std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(static_cast<unsigned>(rows)));
      int64_t width = 0;
      for (int64_t n : lengths) width = std::max(width, (n + kBlockSize - 1) / kBlockSize);
      width += 2;
      std::vector<int64_t> table(static_cast<size_t>(rows * width), 0), slots, positions;
      size_t next = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = lengths[static_cast<size_t>(r)];
        for (int64_t b = 0; b < (n + kBlockSize - 1) / kBlockSize; ++b) table[static_cast<size_t>(r * width + b)] = free_blocks[next++];
        const int64_t last = n - 1;  // this step's token is the row's last
        slots.push_back(table[static_cast<size_t>(r * width + last / kBlockSize)] * kBlockSize + last % kBlockSize);
        positions.push_back(last);
      }
      ForwardInputs in;
      in.input_ids = torch::randint(config.vocab_size, {rows, 1}, torch::TensorOptions().dtype(torch::kInt64)).to(torch::kCUDA);
      in.position_ids = torch::tensor(positions).view({rows, 1}).to(torch::kCUDA);
      in.cache = &cache;
      in.cache_slots = torch::tensor(slots).to(torch::kCUDA);
      in.block_tables = torch::tensor(table).view({rows, width}).to(torch::kCUDA);
      in.key_lengths = torch::tensor(lengths).to(torch::kCUDA);
      const auto logits = [&](bool kernels) {
        const FusedInferenceKernels guard(kernels);
        return model->forward(in).to(torch::kFloat32).cpu();
      };
      const torch::Tensor reference = logits(false);
      const torch::Tensor with_kernels = logits(true);
      ASSERT_FALSE(with_kernels.isnan().any().item<bool>()) << rows << " rows";
      const double error = relative_error(with_kernels, reference);
      // fp32: the reductions' order only; bf16: a few bf16 steps of the logits (the projections'
      // outputs and the attention's are rounded to bf16 on both paths, from sums taken in other orders).
      EXPECT_LE(error, dtype == torch::kFloat32 ? 1e-4 : 3e-2) << rows << " rows, " << c10::toString(dtype);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HeadLayouts, PagedDecodeStep,
                         ::testing::Values(HeadLayout{4, 2, 16, 64},       // the golden qwen2 test model
                                           HeadLayout{14, 2, 64, 896},     // Qwen2-0.5B: 7 query heads per kv head
                                           HeadLayout{12, 2, 128, 1536},   // Qwen2-1.5B: 6 per kv head, head_dim 128
                                           HeadLayout{8, 8, 32, 256},      // MHA
                                           HeadLayout{16, 1, 64, 512},     // MQA with 16 query heads
                                           HeadLayout{6, 3, 8, 48},        // head_dim 8: one lane per key
                                           HeadLayout{4, 4, 12, 48},       // head_dim 12: the attention falls back
                                           // down_proj's rows of 9216 exceed what the projection kernel
                                           // loads before its wait (8192 with 4 warps per column)
                                           HeadLayout{16, 2, 128, 3072}));

// The engine's decode with the kernels and without gives the same greedy tokens at Qwen2-0.5B's
// head layout, over a prompt long enough that the attention spans several key chunks.
TEST(PagedDecodeStep, GreedyTokensOfTheEngineAreTheSameWithAndWithoutTheKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)";
  ModelConfig config = load_model_config(kModels / "qwen2_gqa2_tied");
  config.num_attention_heads = 14;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.hidden_size = 896;
  config.intermediate_size = 1792;
  config.max_position_embeddings = 4096;
  CausalLm model(config);
  init_weights(model, 3);
  model->to(torch::kCUDA, torch::kFloat32);
  std::vector<int64_t> prompt(200);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 37 + 11) % static_cast<size_t>(config.vocab_size));
  GenerationOptions options;
  options.max_new_tokens = 48;
  options.sampling.temperature = 0;
  EngineOptions plain, kernels;
  plain.fused_kernels = false;
  kernels.fused_kernels = true;
  const auto a = GenerationEngine(model, plain).run({{prompt, 3, std::nullopt, std::nullopt}}, options);
  const auto b = GenerationEngine(model, kernels).run({{prompt, 3, std::nullopt, std::nullopt}}, options);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t s = 0; s < a.sequences.size(); ++s) {
    EXPECT_EQ(a.sequences[s].tokens, b.sequences[s].tokens) << "sample " << s;
    for (size_t t = 0; t < std::min(a.sequences[s].tokens.size(), b.sequences[s].tokens.size()); ++t) {
      EXPECT_NEAR(a.sequences[s].model_logprobs[t], b.sequences[s].model_logprobs[t], 1e-4) << "sample " << s << ", token " << t;
    }
  }
}

// The projection kernel alone against at::linear, for every row count it takes (the model uses it
// up to kSmallRowsModelLimit or kSmallRowsQkvLimit), k within and beyond the weights it loads
// before its wait, with and without bias, fp32 and bf16; and its gated form (the MLP's
// silu(x gate^T) * x up^T in one launch) against the ATen ops the model runs without it.
TEST(SmallRowsLinear, MatchesAtLinearForEveryRowCountItTakes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)";
  torch::manual_seed(4);
  namespace F = torch::nn::functional;
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    const auto options = torch::TensorOptions().dtype(dtype).device(torch::kCUDA);
    const auto type = dtype == torch::kFloat32 ? cuda::ElementType::f32 : cuda::ElementType::bf16;
    const double tolerance = dtype == torch::kFloat32 ? 1e-5 : 2e-2;
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    for (const int64_t k : {64, 896, 4864, 9216}) {
      const torch::Tensor w1 = torch::randn({200, k}, options) / std::sqrt(static_cast<double>(k));
      const torch::Tensor w2 = torch::randn({200, k}, options) / std::sqrt(static_cast<double>(k));
      const torch::Tensor w3 = torch::randn({24, k}, options) / std::sqrt(static_cast<double>(k));
      const torch::Tensor b1 = torch::randn({200}, options), b3 = torch::randn({24}, options);
      for (int64_t rows = 1; rows <= cuda::kMaxLinearRows; ++rows) {
        const std::string where = "rows " + std::to_string(rows) + ", k " + std::to_string(k) + ", " + c10::toString(dtype);
        const torch::Tensor x = torch::randn({rows, k}, options);
        torch::Tensor y1 = torch::empty({rows, 200}, options), y3 = torch::empty({rows, 24}, options);
        const cuda::LinearSegment segments[] = {{w1.data_ptr(), nullptr, y1.data_ptr(), 200},
                                                {w3.data_ptr(), b3.data_ptr(), y3.data_ptr(), 24}};
        ASSERT_TRUE(cuda::small_rows_linear_fits(rows, k, x.data_ptr(), segments, 2));
        cuda::small_rows_linear(type, x.data_ptr(), rows, k, segments, 2, stream);
        EXPECT_LE(relative_error(y1, F::linear(x, w1)), tolerance) << where;
        EXPECT_LE(relative_error(y3, F::linear(x, w3, b3)), tolerance) << where << ", with bias";

        // Gated, with a bias on the gate only: each projection rounded as at::linear stores it, then
        // silu and the product, each rounded (what silu_mul computes).
        torch::Tensor gated = torch::empty({rows, 200}, options);
        cuda::small_rows_gated_linear(type, x.data_ptr(), rows, k, {w1.data_ptr(), b1.data_ptr(), gated.data_ptr(), 200},
                                      {w2.data_ptr(), nullptr, nullptr, 200}, stream);
        const torch::Tensor expected = torch::silu(F::linear(x, w1, b1)) * F::linear(x, w2);
        EXPECT_LE(relative_error(gated, expected), tolerance) << where << ", gated";
      }
    }
  }
  // The gated form needs the two projections to have the same width.
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  const torch::Tensor x = torch::randn({1, 64}, options), w1 = torch::randn({8, 64}, options),
                      w2 = torch::randn({16, 64}, options), out = torch::empty({1, 8}, options);
  EXPECT_THROW(cuda::small_rows_gated_linear(cuda::ElementType::f32, x.data_ptr(), 1, 64, {w1.data_ptr(), nullptr, out.data_ptr(), 8},
                                             {w2.data_ptr(), nullptr, nullptr, 16}, c10::cuda::getCurrentCUDAStream().stream()),
               Error);
}

// Programmatic dependent launch changes when a kernel may start, never what it computes: sampled
// tokens and their log-probabilities are the same bits with it and without, in bf16 through the
// CUDA graphs, at Qwen2-0.5B's layer shapes (down_proj split over 4 warps per column).
TEST(PagedDecodeStep, SampledTokensAreTheSameBitsWithAndWithoutProgrammaticLaunch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine (the gpu label runs on the GPU machine)";
  ModelConfig config = load_model_config(kModels / "qwen2_gqa2_tied");
  config.num_attention_heads = 14;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.hidden_size = 896;
  config.intermediate_size = 4864;
  config.max_position_embeddings = 4096;
  CausalLm model(config);
  init_weights(model, 5);
  model->to(torch::kCUDA, torch::kBFloat16);
  std::vector<int64_t> prompt(150);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>((i * 53 + 7) % static_cast<size_t>(config.vocab_size));
  GenerationOptions options;
  options.max_new_tokens = 40;
  options.sampling.temperature = 1.0;
  options.sampling.seed = 17;
  const bool before = cuda::programmatic_launch_allowed();
  const auto run = [&](bool programmatic) {
    cuda::set_programmatic_launch(programmatic);
    GenerationEngine engine(model, EngineOptions{});
    // As many samples as the forwards launched programmatically take (ProgrammaticLaunchScope).
    return engine.run({{prompt, cuda::kSmallRowsModelLimit, std::nullopt, std::nullopt}}, options);
  };
  const GenerationResult a = run(false);
  const GenerationResult b = run(true);
  cuda::set_programmatic_launch(before);
  EXPECT_TRUE(a.used_cuda_graph && b.used_cuda_graph);
  ASSERT_EQ(a.sequences.size(), static_cast<size_t>(cuda::kSmallRowsModelLimit));
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t s = 0; s < a.sequences.size(); ++s) {
    EXPECT_EQ(a.sequences[s].tokens, b.sequences[s].tokens) << "sample " << s;
    EXPECT_EQ(a.sequences[s].logprobs, b.sequences[s].logprobs) << "sample " << s;
  }
}

}  // namespace
}  // namespace crl::policy
