// token_log_probs' CUDA kernels (label gpu; skipped without a GPU) against its ATen path on the
// same values: fp32, bf16 and fp16 logits, a Qwen2-sized vocabulary, strided rows, masked (-inf)
// logits, and a target out of range.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "machine/machine_probe.h"
#include "rl/token_log_probs.h"

namespace crl::rl {
namespace {

class TokenLogProbsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_visible()) GTEST_SKIP() << "no CUDA GPU visible: the kernels cannot run here";
  }
};

// Forward values and gradients (for a random upstream gradient) of `logits` [N, V].
std::pair<torch::Tensor, torch::Tensor> run(const torch::Tensor& logits, const torch::Tensor& targets,
                                            const torch::Tensor& upstream) {
  const torch::Tensor x = logits.detach().clone().requires_grad_(true);
  const torch::Tensor logp = token_log_probs(x, targets);
  (logp * upstream).sum().backward();
  return {logp.detach().cpu(), x.grad().to(torch::kFloat32).cpu()};
}

void expect_kernels_match_aten(int64_t rows, int64_t vocab, torch::ScalarType dtype, double grad_tol) {
  torch::manual_seed(rows * 131 + vocab);
  const torch::Tensor logits = (torch::randn({rows, vocab}) * 3).to(dtype);
  const torch::Tensor targets = torch::randint(0, vocab, {rows}, torch::kInt64);
  const torch::Tensor upstream = torch::randn({rows});
  const auto [cpu_logp, cpu_grad] = run(logits, targets, upstream);
  const torch::Device gpu(torch::kCUDA, 0);
  const auto [gpu_logp, gpu_grad] = run(logits.to(gpu), targets.to(gpu), upstream.to(gpu));
  EXPECT_LE((gpu_logp - cpu_logp).abs().max().item<double>(), 2e-5) << c10::toString(dtype) << " vocab " << vocab;
  EXPECT_LE((gpu_grad - cpu_grad).abs().max().item<double>(), grad_tol) << c10::toString(dtype) << " vocab " << vocab;
}

TEST_F(TokenLogProbsCuda, Fp32MatchesAten) {
  expect_kernels_match_aten(37, 1000, torch::kFloat32, 1e-6);
  expect_kernels_match_aten(4, 151936, torch::kFloat32, 1e-6);
  expect_kernels_match_aten(3, 7, torch::kFloat32, 1e-6);  // fewer entries than threads
}

TEST_F(TokenLogProbsCuda, Bf16AndFp16MatchAten) {
  // Gradients are rounded to the logits' type on both sides; they may differ by one step.
  expect_kernels_match_aten(16, 151936, torch::kBFloat16, 1e-2);
  expect_kernels_match_aten(16, 4099, torch::kFloat16, 1e-3);
}

TEST_F(TokenLogProbsCuda, StridedRowsMaskedLogitsAndBadTargets) {
  const torch::Device gpu(torch::kCUDA, 0);
  torch::Tensor wide = torch::randn({5, 300}, torch::TensorOptions().device(gpu));
  wide.narrow(1, 0, 20).fill_(-std::numeric_limits<float>::infinity());  // masked vocabulary entries
  const torch::Tensor rows = wide.narrow(1, 0, 256);                       // row stride 300
  const torch::Tensor targets = torch::full({5}, 100, torch::TensorOptions().dtype(torch::kInt64).device(gpu));
  const torch::Tensor want = rows.cpu().log_softmax(-1).select(1, 100);
  EXPECT_LE((token_log_probs(rows, targets).cpu() - want).abs().max().item<double>(), 1e-5);
  const torch::Tensor bad = torch::full({5}, 256, torch::TensorOptions().dtype(torch::kInt64).device(gpu));
  EXPECT_TRUE(token_log_probs(rows, bad).isnan().all().item<bool>());
}

}  // namespace
}  // namespace crl::rl
