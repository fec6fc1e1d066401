// Tests of MasterAdamW (against LibTorch's AdamW), gradient-norm clipping, the learning-rate
// schedule, the fp32 master weights behind bf16 parameters, and steps skipped for non-finite
// gradients.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "rl/lr_schedule.h"
#include "rl/optimizer.h"

namespace crl::rl {
namespace {

TEST(MasterAdamW, MatchesLibTorchAdamWOnFp32) {
  torch::manual_seed(0);
  const torch::Tensor init = torch::randn({4, 3});
  torch::Tensor ours = init.clone().requires_grad_(true);
  torch::Tensor theirs = init.clone().requires_grad_(true);
  AdamWOptions options{0.9, 0.95, 1e-8, 0.1};
  MasterAdamW adamw({{"w", ours}}, options);
  torch::optim::AdamW reference({theirs}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 6; ++step) {
    const torch::Tensor grad = torch::randn({4, 3});
    const double lr = 1e-2 * (step + 1) / 6.0;
    static_cast<torch::optim::AdamWOptions&>(reference.param_groups()[0].options()).lr(lr);
    theirs.mutable_grad() = grad.clone();
    reference.step();
    adamw.step({grad.clone()}, lr);
    ASSERT_TRUE(torch::allclose(ours, theirs, 1e-6, 1e-7)) << "step " << step;
  }
  EXPECT_EQ(adamw.steps(), 6);
}

TEST(MasterAdamW, Bf16ParametersFollowFp32MastersThroughUpdatesBelowTheirResolution) {
  // Each update (lr 1e-4, Adam's normalised step ~1) is far below bf16's spacing at 1.0
  // (2^-7): a bf16-only optimiser would never move. The master accumulates them.
  torch::Tensor param = torch::ones({8}, torch::kBFloat16).requires_grad_(true);
  MasterAdamW adamw({{"w", param}}, {});
  for (int step = 0; step < 200; ++step) adamw.step({torch::ones({8})}, 1e-4);
  const auto state = adamw.state_tensors();
  const torch::Tensor master = state[0].second;
  EXPECT_EQ(state[0].first, "w.master");
  EXPECT_NEAR(master[0].item<double>(), 1.0 - 200 * 1e-4, 1e-4);
  EXPECT_TRUE(torch::equal(param.detach(), master.to(torch::kBFloat16)));
  EXPECT_LT(param[0].item<double>(), 1.0);
}

TEST(MasterAdamW, StateRoundTripContinuesIdentically) {
  torch::manual_seed(1);
  torch::Tensor a = torch::randn({5}).requires_grad_(true);
  torch::Tensor b = a.detach().clone().requires_grad_(true);
  MasterAdamW first({{"p", a}}, {0.9, 0.99, 1e-8, 0.01});
  for (int i = 0; i < 3; ++i) first.step({torch::randn({5})}, 1e-2);
  MasterAdamW second({{"p", b}}, {0.9, 0.99, 1e-8, 0.01});
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : first.state_tensors()) saved[name] = tensor.clone();
  second.load_state_tensors(saved, "test");
  EXPECT_TRUE(torch::equal(a.detach(), b.detach()));
  const torch::Tensor g = torch::randn({5});
  first.step({g.clone()}, 1e-2);
  second.step({g.clone()}, 1e-2);
  EXPECT_TRUE(torch::equal(a.detach(), b.detach()));
  EXPECT_EQ(second.steps(), 4);
  saved.erase("p.exp_avg");
  EXPECT_THROW(second.load_state_tensors(saved, "test"), InputError);
}

// Bitwise copies of an optimiser's state and parameters, to compare before and after.
std::vector<torch::Tensor> snapshot(const MasterAdamW& adamw) {
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : adamw.state_tensors()) out.push_back(t.clone());
  for (const auto& [name, t] : adamw.parameters()) out.push_back(t.detach().clone());
  return out;
}

void expect_bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << what << ": tensor " << i;
}

// A NaN or an Inf in one element of one gradient skips the step on the device: masters, moments,
// step count and the (bf16) parameters stay bitwise as they were, and the next finite step is the
// one an optimiser that never saw the bad gradients takes. Both ways of finding it: the optimiser's
// own check, and the flag from the clipped norm that the trainer passes.
TEST(MasterAdamW, NonFiniteGradientSkipsTheStepAndTheNextStepProceeds) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    for (const bool flag_from_norm : {false, true}) {
      torch::manual_seed(3);
      const torch::Tensor w0 = torch::randn({4, 3}), v0 = torch::randn({5});
      torch::Tensor w = w0.to(torch::kBFloat16).requires_grad_(true), v = v0.clone().requires_grad_(true);
      torch::Tensor w_twin = w0.to(torch::kBFloat16).requires_grad_(true), v_twin = v0.clone().requires_grad_(true);
      MasterAdamW adamw({{"w", w}, {"v", v}}, {0.9, 0.99, 1e-8, 0.01});
      MasterAdamW twin({{"w", w_twin}, {"v", v_twin}}, {0.9, 0.99, 1e-8, 0.01});
      const auto step_both = [&](uint64_t seed) {
        torch::manual_seed(seed);
        const std::vector<torch::Tensor> grads{torch::randn({4, 3}), torch::randn({5})};
        const torch::Tensor f1 = adamw.step({grads[0].clone(), grads[1].clone()}, 1e-2);
        const torch::Tensor f2 = twin.step({grads[0].clone(), grads[1].clone()}, 1e-2);
        EXPECT_EQ(f1.item<float>(), 0.0f);
        EXPECT_EQ(f2.item<float>(), 0.0f);
      };
      step_both(10);
      step_both(11);
      const std::vector<torch::Tensor> before = snapshot(adamw);

      std::vector<torch::Tensor> poisoned{torch::randn({4, 3}), torch::randn({5})};
      poisoned[1][2] = bad;
      torch::Tensor flag;
      if (flag_from_norm) {
        const torch::Tensor norm = MasterAdamW::clip_grad_norm(poisoned, 1.0);
        flag = adamw.step(poisoned, 1e-2, MasterAdamW::non_finite(norm));
      } else {
        flag = adamw.step(poisoned, 1e-2);
      }
      EXPECT_EQ(flag.item<float>(), 1.0f) << "bad value " << bad;
      EXPECT_EQ(adamw.steps(), 2) << "a skipped step is not counted";
      expect_bitwise_equal(snapshot(adamw), before, "after the skipped step");

      step_both(12);
      EXPECT_EQ(adamw.steps(), 3);
      expect_bitwise_equal(snapshot(adamw), snapshot(twin), "the next step against the twin");
    }
  }
}

// settle_step() hands in the outcome the caller read, so steps() needs no read; it refuses to
// settle anything but exactly one pending step.
TEST(MasterAdamW, SettleStepCountsOnlyAppliedSteps) {
  torch::Tensor p = torch::zeros({3}).requires_grad_(true);
  MasterAdamW adamw({{"p", p}}, {});
  EXPECT_THROW(adamw.settle_step(false), Error);
  adamw.step({torch::ones({3})}, 1e-3);
  adamw.settle_step(false);
  EXPECT_EQ(adamw.steps(), 1);
  adamw.step({torch::full({3}, std::numeric_limits<float>::quiet_NaN())}, 1e-3);
  adamw.settle_step(true);
  EXPECT_EQ(adamw.steps(), 1);
  adamw.step({torch::ones({3})}, 1e-3);
  adamw.step({torch::ones({3})}, 1e-3);
  EXPECT_THROW(adamw.settle_step(false), Error);
  EXPECT_EQ(adamw.steps(), 3);  // read from the device
}

TEST(MasterAdamW, RejectsGradientsOfTheWrongShapeOrDtype) {
  torch::Tensor p = torch::zeros({3}).requires_grad_(true);
  MasterAdamW adamw({{"p", p}}, {});
  EXPECT_THROW(adamw.step({torch::zeros({4})}, 1e-3), InputError);
  EXPECT_THROW(adamw.step({torch::zeros({3}, torch::kBFloat16)}, 1e-3), InputError);
  EXPECT_THROW(adamw.step({}, 1e-3), InputError);
}

TEST(ClipGradNorm, ScalesToTheMaximumAndReportsTheNormBefore) {
  std::vector<torch::Tensor> grads{torch::tensor({3.0f}), torch::tensor({4.0f})};
  EXPECT_NEAR(MasterAdamW::clip_grad_norm(grads, 1.0).item<double>(), 5.0, 1e-6);
  EXPECT_NEAR(grads[0].item<float>(), 0.6f, 1e-5);
  EXPECT_NEAR(grads[1].item<float>(), 0.8f, 1e-5);
  // Below the maximum, or with clipping off: unchanged.
  EXPECT_NEAR(MasterAdamW::clip_grad_norm(grads, 10.0).item<double>(), 1.0, 1e-5);
  EXPECT_NEAR(grads[1].item<float>(), 0.8f, 1e-5);
}

TEST(LrSchedule, WarmsUpLinearlyThenDecaysByCosineToTheFloor) {
  LrSchedule s{1.0, 4, 14, 0.1};
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr_at(4), 1.0);
  EXPECT_NEAR(s.lr_at(9), 0.1 + 0.9 * 0.5, 1e-12);  // halfway through the decay
  EXPECT_NEAR(s.lr_at(14), 0.1, 1e-12);
  EXPECT_NEAR(s.lr_at(100), 0.1, 1e-12);
  for (int64_t i = 4; i < 14; ++i) EXPECT_GE(s.lr_at(i), s.lr_at(i + 1));
  EXPECT_THROW((LrSchedule{1.0, 5, 4, 0.1}.validate()), InputError);
  EXPECT_THROW((LrSchedule{0.0, 0, 4, 0.1}.validate()), InputError);
  const LrSchedule back = LrSchedule::from_json(s.to_json(), "test");
  EXPECT_EQ(back.total_steps, 14);
}

}  // namespace
}  // namespace crl::rl
