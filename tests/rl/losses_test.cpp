// Tests of the SFT and GRPO losses against direct computations on small hand-made tensors,
// gradients included (hand-derived formulas and central finite differences in fp64).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "rl/losses.h"

namespace crl::rl {
namespace {

TEST(SftLoss, MasksPromptAndMatchesDirectCrossEntropy) {
  torch::manual_seed(1);
  const torch::Tensor logits = torch::randn({2, 4, 5}, torch::kFloat64).requires_grad_(true);
  const torch::Tensor ids = torch::tensor({{1, 2, 3, 4}, {0, 4, 4, 1}}, torch::kInt64);
  // Row 0: prompt = tokens 0,1; completion 2,3. Row 1: prompt token 0, completion 1,2; 3 is padding.
  const torch::Tensor mask = torch::tensor({{0, 0, 1, 1}, {0, 1, 1, 0}}, torch::kInt64);
  const LossSum loss = sft_loss(logits, ids, mask);
  EXPECT_EQ(loss.tokens.item<double>(), 4.0);

  // Direct: -log softmax(logits[b, t-1])[ids[b, t]] for each target (b, t).
  const auto direct_term = [&](int b, int t) {
    const auto row = logits.detach()[b][t - 1];
    return -(row[ids[b][t].item<int64_t>()] - torch::logsumexp(row, 0)).item<double>();
  };
  const double expected = direct_term(0, 2) + direct_term(0, 3) + direct_term(1, 1) + direct_term(1, 2);
  EXPECT_NEAR(loss.sum.item<double>(), expected, 1e-6);

  // Hand-derived gradient: softmax(row) - onehot(target) at each predicting position, 0 elsewhere.
  loss.sum.backward();
  torch::Tensor expected_grad = torch::zeros_like(logits);
  for (auto [b, t] : std::vector<std::pair<int, int>>{{0, 2}, {0, 3}, {1, 1}, {1, 2}}) {
    torch::Tensor g = torch::softmax(logits.detach()[b][t - 1], 0);
    g[ids[b][t].item<int64_t>()] -= 1.0;
    expected_grad[b][t - 1] = g;
  }
  // fp32 log_softmax inside the loss: tolerance of fp32 round-off.
  EXPECT_TRUE(torch::allclose(logits.grad(), expected_grad, 1e-5, 1e-6));
}

TEST(SftLoss, RejectsMismatchedMask) {
  const torch::Tensor logits = torch::zeros({1, 3, 4});
  const torch::Tensor ids = torch::zeros({1, 3}, torch::kInt64);
  EXPECT_THROW(sft_loss(logits, ids, torch::ones({1, 2})), InputError);
  EXPECT_THROW(sft_loss(logits, torch::zeros({1, 2}, torch::kInt64), torch::ones({1, 2})), InputError);
}

TEST(TokenEntropy, MatchesDirectEntropyOnTargetTokensWhateverTheChunks) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({2, 5, 7}, torch::kFloat32) * 3;
  // Row 0: targets at 2, 3, 4 (predicted from positions 1, 2, 3); row 1: target at 1 (from 0).
  const torch::Tensor mask = torch::tensor({{0, 0, 1, 1, 1}, {0, 1, 0, 0, 0}}, torch::kInt64);
  double expected = 0;
  for (auto [b, t] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {0, 3}, {1, 0}}) {
    const torch::Tensor p = torch::softmax(logits[b][t].to(torch::kFloat64), 0);
    expected += -(p * p.log()).sum().item<double>();
  }
  for (int64_t chunk : {1, 3, 256}) {
    const EntropySum e = token_entropy_sum(logits, mask, chunk);
    EXPECT_EQ(e.tokens.item<double>(), 4.0);
    EXPECT_NEAR(e.sum.item<double>(), expected, 1e-4) << "chunk_rows " << chunk;
    EXPECT_FALSE(e.sum.requires_grad());
  }
  // Equal logits: log V per token; a masked-out vocabulary entry (-inf) counts as p = 0, not NaN.
  torch::Tensor flat = torch::zeros({1, 2, 4}, torch::kBFloat16);
  EXPECT_NEAR(token_entropy_sum(flat, torch::tensor({{0, 1}}), 256).sum.item<double>(), std::log(4.0), 1e-6);
  flat.index_put_({0, 0, 3}, -std::numeric_limits<float>::infinity());
  EXPECT_NEAR(token_entropy_sum(flat, torch::tensor({{0, 1}}), 256).sum.item<double>(), std::log(3.0), 1e-6);
  EXPECT_THROW(token_entropy_sum(flat, torch::ones({1, 3}), 256), InputError);
}

TEST(GroupAdvantages, NormalisesEachGroup) {
  const torch::Tensor rewards = torch::tensor({1.0, 2.0, 3.0, 5.0, 5.0, 5.0});
  const torch::Tensor adv = group_advantages(rewards, 3, 0.0 + 1e-4);
  // Group 1: mean 2, unbiased std 1 -> (-1, 0, 1) / (1 + 1e-4). Group 2: all equal -> 0.
  const double s = 1.0 / (1.0 + 1e-4);
  const std::vector<double> expected{-s, 0.0, s, 0.0, 0.0, 0.0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(adv[i].item<double>(), expected[i], 1e-6) << i;
  EXPECT_THROW(group_advantages(rewards, 4), InputError);
  EXPECT_THROW(group_advantages(rewards, 1), InputError);
}

// Per-token GRPO loss written out with plain arithmetic, for one token.
double direct_grpo_token(double lp, double old_lp, double ref_lp, double adv, const GrpoOptions& o) {
  const double ratio = std::exp(lp - old_lp);
  const double clipped = std::clamp(ratio, 1.0 - o.clip_epsilon_low, 1.0 + o.clip_epsilon_high);
  double loss = -std::min(ratio * adv, clipped * adv);
  if (o.kl_beta > 0) loss += o.kl_beta * (std::exp(ref_lp - lp) - (ref_lp - lp) - 1.0);
  return loss;
}

struct GrpoCase {
  torch::Tensor logp, old_logp, ref_logp, adv, mask;
};

GrpoCase make_grpo_case() {
  GrpoCase c;
  // Ratios exp(lp - old) chosen to fall inside, above (1.5) and below (0.6) the clip range, for
  // positive and negative advantages, so every branch of the min is taken.
  c.old_logp = torch::tensor({{-1.0, -2.0, -0.5, -1.2}, {-0.7, -1.5, -2.2, -0.3}}, torch::kFloat64);
  const torch::Tensor log_ratio = torch::tensor({{0.05, std::log(1.5), std::log(0.6), 0.0},
                                                 {std::log(1.5), std::log(0.6), -0.1, 0.3}},
                                                torch::kFloat64);
  c.logp = (c.old_logp + log_ratio).detach().requires_grad_(true);
  c.ref_logp = torch::tensor({{-1.1, -1.8, -0.9, -1.0}, {-0.6, -1.0, -2.0, -0.5}}, torch::kFloat64);
  c.adv = torch::tensor({0.8, -1.3}, torch::kFloat64);
  c.mask = torch::tensor({{0, 1, 1, 1}, {0, 1, 1, 0}}, torch::kFloat64);
  return c;
}

void check_grpo_against_direct(const GrpoOptions& options) {
  GrpoCase c = make_grpo_case();
  const LossSum loss = grpo_loss(c.logp, c.old_logp, c.adv, c.mask, options, c.ref_logp);
  double expected = 0, expected_kl = 0;
  int tokens = 0;
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 4; ++t) {
      if (c.mask[b][t].item<double>() == 0) continue;
      ++tokens;
      const double lp = c.logp[b][t].item<double>(), ref_lp = c.ref_logp[b][t].item<double>();
      expected += direct_grpo_token(lp, c.old_logp[b][t].item<double>(), ref_lp, c.adv[b].item<double>(), options);
      if (options.kl_beta > 0) expected_kl += std::exp(ref_lp - lp) - (ref_lp - lp) - 1.0;
    }
  }
  EXPECT_EQ(loss.tokens.item<double>(), tokens);
  EXPECT_NEAR(loss.kl_sum.item<double>(), expected_kl, 1e-5);
  EXPECT_NEAR(loss.sum.item<double>(), expected, 1e-5);

  // Gradient against central finite differences of the direct formula (away from the clip
  // boundaries, where the loss is smooth).
  loss.sum.backward();
  const double h = 1e-4;
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 4; ++t) {
      double fd = 0;
      if (c.mask[b][t].item<double>() != 0) {
        const double lp = c.logp[b][t].item<double>(), old = c.old_logp[b][t].item<double>();
        const double ref = c.ref_logp[b][t].item<double>(), a = c.adv[b].item<double>();
        fd = (direct_grpo_token(lp + h, old, ref, a, options) - direct_grpo_token(lp - h, old, ref, a, options)) /
             (2 * h);
      }
      EXPECT_NEAR(c.logp.grad()[b][t].item<double>(), fd, 1e-4) << "b " << b << " t " << t;
    }
  }
}

TEST(GrpoLoss, ClippedSurrogateMatchesDirectComputation) { check_grpo_against_direct({0.2, 0.28, 0.0}); }

TEST(GrpoLoss, KlPenaltyMatchesDirectComputation) { check_grpo_against_direct({0.2, 0.28, 0.05}); }

TEST(GrpoLoss, AsymmetricClipUsesSeparateEpsilons) { check_grpo_against_direct({0.1, 0.6, 0.0}); }

TEST(GrpoLoss, HandDerivedGradientsPerBranch) {
  // Ratio 1.5 with A > 0 is clipped at 1 + 0.28: no gradient. Ratio 0.6 with A > 0 is below the
  // floor, where min() takes the unclipped side: gradient -A * ratio. With A < 0 the roles swap.
  GrpoCase c = make_grpo_case();
  const LossSum loss = grpo_loss(c.logp, c.old_logp, c.adv, c.mask, {0.2, 0.28, 0.0});
  loss.sum.backward();
  const torch::Tensor g = c.logp.grad();
  EXPECT_NEAR(g[0][1].item<double>(), 0.0, 1e-9);                 // ratio 1.5, A = 0.8: clipped
  EXPECT_NEAR(g[0][2].item<double>(), -0.8 * 0.6, 1e-6);          // ratio 0.6, A = 0.8: unclipped
  EXPECT_NEAR(g[1][1].item<double>(), 0.0, 1e-9);                 // ratio 0.6, A = -1.3: clipped
  EXPECT_NEAR(g[1][2].item<double>(), 1.3 * std::exp(-0.1), 1e-6);  // inside the range
  EXPECT_NEAR(g[1][3].item<double>(), 0.0, 1e-12);                // masked
  EXPECT_EQ(loss.clipped_tokens.item<double>(), 2.0);
}

TEST(GrpoLoss, ValidatesInputs) {
  GrpoCase c = make_grpo_case();
  EXPECT_THROW(grpo_loss(c.logp, c.old_logp, c.adv, c.mask, {0.2, 0.2, 0.1}), InputError);  // no reference
  EXPECT_THROW(grpo_loss(c.logp, c.old_logp.slice(1, 0, 3), c.adv, c.mask, {}), InputError);
  EXPECT_THROW(grpo_loss(c.logp, c.old_logp, torch::ones({3}), c.mask, {}), InputError);
  EXPECT_THROW(grpo_loss(c.logp, c.old_logp, c.adv, c.mask, {1.5, 0.2, 0.0}), InputError);
}

TEST(NextTokenLogProbs, FeedsGrpoFromLogits) {
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({1, 3, 6});
  const torch::Tensor ids = torch::tensor({{2, 5, 1}}, torch::kInt64);
  const torch::Tensor lp = next_token_log_probs(logits, ids);
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(lp[0][0].item<float>(), 0.0f);
  EXPECT_NEAR(lp[0][1].item<float>(), torch::log_softmax(logits[0][0], 0)[5].item<float>(), 1e-6);
  EXPECT_NEAR(lp[0][2].item<float>(), torch::log_softmax(logits[0][1], 0)[1].item<float>(), 1e-6);
}

}  // namespace
}  // namespace crl::rl
