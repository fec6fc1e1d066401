// token_log_probs on the CPU (its ATen path): values and gradients against log_softmax + gather
// with autograd, for fp64, fp32 and bf16 logits, strided rows, and bad input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "rl/token_log_probs.h"

namespace crl::rl {
namespace {

// The direct computation: log_softmax in the compute type, then the target's entry.
torch::Tensor direct(const torch::Tensor& logits, const torch::Tensor& targets) {
  const auto type = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  return logits.to(type).log_softmax(-1).gather(1, targets.unsqueeze(1)).squeeze(1);
}

struct Case {
  torch::Tensor logits, targets, upstream;
};

Case make_case(int64_t rows, int64_t vocab, torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  Case c;
  c.logits = (torch::randn({rows, vocab}, torch::kFloat64) * 4).to(dtype);
  c.targets = torch::randint(0, vocab, {rows}, torch::kInt64);
  c.upstream = torch::randn({rows}, torch::kFloat64);
  return c;
}

// Values and gradients of token_log_probs and of the direct computation, for one case.
void expect_matches_direct(const Case& c, double value_tol, double grad_tol) {
  const torch::Tensor a = c.logits.clone().requires_grad_(true);
  const torch::Tensor b = c.logits.clone().requires_grad_(true);
  const torch::Tensor got = token_log_probs(a, c.targets);
  const torch::Tensor want = direct(b, c.targets);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_LE((got - want).abs().max().item<double>(), value_tol);
  (got * c.upstream.to(got.scalar_type())).sum().backward();
  (want * c.upstream.to(want.scalar_type())).sum().backward();
  ASSERT_TRUE(a.grad().defined() && b.grad().defined());
  EXPECT_EQ(a.grad().scalar_type(), c.logits.scalar_type());
  EXPECT_LE((a.grad().to(torch::kFloat64) - b.grad().to(torch::kFloat64)).abs().max().item<double>(), grad_tol);
}

TEST(TokenLogProbs, Fp64MatchesLogSoftmaxAndItsGradient) { expect_matches_direct(make_case(7, 33, torch::kFloat64, 1), 1e-12, 1e-12); }

TEST(TokenLogProbs, Fp32MatchesLogSoftmaxAndItsGradient) { expect_matches_direct(make_case(9, 1000, torch::kFloat32, 2), 1e-5, 1e-6); }

TEST(TokenLogProbs, Bf16LogitsComputeInFp32AndGiveBf16Gradients) {
  // The gradient is rounded to bf16 on both sides: at most about one bf16 step of |grad| <= |upstream|.
  expect_matches_direct(make_case(5, 257, torch::kBFloat16, 3), 1e-5, 4e-2);
}

TEST(TokenLogProbs, StridedRowsAndColumnMajorLogitsGiveTheSameValues) {
  const Case c = make_case(6, 40, torch::kFloat32, 4);
  const torch::Tensor wide = torch::zeros({6, 64});
  wide.narrow(1, 0, 40).copy_(c.logits);
  const torch::Tensor rows = wide.narrow(1, 0, 40);  // row stride 64
  EXPECT_LE((token_log_probs(rows, c.targets) - direct(c.logits, c.targets)).abs().max().item<double>(), 1e-5);
  const torch::Tensor columns = c.logits.t().contiguous().t();  // vocabulary not contiguous: copied first
  EXPECT_LE((token_log_probs(columns, c.targets) - direct(c.logits, c.targets)).abs().max().item<double>(), 1e-5);
}

TEST(TokenLogProbs, RejectsBadShapesAndTypes) {
  const torch::Tensor logits = torch::randn({3, 5});
  EXPECT_THROW(token_log_probs(logits.unsqueeze(0), torch::zeros({3}, torch::kInt64)), InputError);
  EXPECT_THROW(token_log_probs(logits, torch::zeros({4}, torch::kInt64)), InputError);
  EXPECT_THROW(token_log_probs(logits, torch::zeros({3}, torch::kInt32)), InputError);
  EXPECT_THROW(token_log_probs(logits.to(torch::kInt64), torch::zeros({3}, torch::kInt64)), InputError);
  EXPECT_ANY_THROW(token_log_probs(logits, torch::full({3}, 5, torch::kInt64)));  // target out of range
}

}  // namespace
}  // namespace crl::rl
