// The degenerate-output rule and its helpers on hand-made tensors: bitwise equality, the fraction of
// elements within tolerance, and findings for identity, constant, and seed-independent outputs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>

#include "program/task_spec.h"
#include "suite/output_checks.h"

namespace crl {
namespace {

TaskSpec spec_of(const std::string& yaml) {
  SourceSection section;
  section.present = true;
  section.text = yaml;
  section.first_line = 1;
  return parse_task_spec(section, "inline");
}

const char* kUnarySpec = R"(task: level1/999_unary
category: activation
inputs:
  - {name: x, shape: [n], dtype: float32, init: randn}
scales:
  small: {n: 1000}
flops: n
bytes: n
)";

TEST(BitwiseEqual, ComparesBitsNotValues) {
  const at::Tensor a = at::tensor({1.0f, -0.0f, std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(bitwise_equal(a, a.clone()));                           // NaN with the same bits is equal
  EXPECT_FALSE(bitwise_equal(a, at::tensor({1.0f, 0.0f, std::numeric_limits<float>::quiet_NaN()})));  // -0 != +0
  EXPECT_FALSE(bitwise_equal(a, a.to(at::kDouble)));                 // dtype differs
  EXPECT_FALSE(bitwise_equal(a, a.reshape({3, 1})));                 // shape differs
  const at::Tensor mask = at::tensor({1, 0}).to(at::kBool);
  EXPECT_TRUE(bitwise_equal(mask, mask.clone()));
}

TEST(FractionClose, CountsElementsWithinAtolPlusRtolTimesReference) {
  const at::Tensor a = at::tensor({0.0f, 1.0f, 2.0f, 3.0f});
  EXPECT_DOUBLE_EQ(fraction_close(a, at::tensor({0.0f, 1.0f, 2.0f, 4.0f}), {1e-4, 1e-4}), 0.75);
  // |3 - 3.1| = 0.1 <= 0.05 + 0.1 * 3.1: close with these tolerances, not with smaller ones.
  EXPECT_DOUBLE_EQ(fraction_close(a, at::tensor({0.0f, 1.0f, 2.0f, 3.1f}), {0.05, 0.1}), 1.0);
  EXPECT_DOUBLE_EQ(fraction_close(a, at::tensor({0.0f, 1.0f, 2.0f, 3.1f}), {0.01, 0.01}), 0.75);
  EXPECT_DOUBLE_EQ(fraction_close(a, at::scalar_tensor(2.0f), {0, 0}), 0.25);  // broadcast constant
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_DOUBLE_EQ(fraction_close(at::tensor({nan, 1.0f}), at::tensor({nan, nan}), {1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(fraction_close(at::tensor({1, 2, 3}), at::tensor({1, 2, 4}), {1, 1}), 2.0 / 3);  // exact ints
}

TEST(DegenerateFindings, FlagsAnOutputThatEqualsItsInput) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::rand({1000});  // non-negative: ReLU is the identity here
  const at::Tensor other = at::rand({1000});
  const auto findings = degenerate_findings(spec, {x}, {at::relu(x)}, {at::relu(other)});
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "equals_input");
  EXPECT_DOUBLE_EQ(findings[0].fraction, 1.0);
  EXPECT_NE(findings[0].detail.find("argument 'x'"), std::string::npos) << findings[0].detail;
}

TEST(DegenerateFindings, AcceptsReluOnSignedInputs) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::randn({1000}), other = at::randn({1000});
  EXPECT_TRUE(degenerate_findings(spec, {x}, {at::relu(x)}, {at::relu(other)}).empty());
}

TEST(DegenerateFindings, FlagsAnOutputThatIsNearlyAllOneConstant) {
  const TaskSpec spec = spec_of(kUnarySpec);
  // A running product of [0, 1) draws: exactly 0 after ~100 elements, so ~99% of 10000 are 0.
  const at::Tensor x = at::rand({10000}), other = at::rand({10000});
  const auto findings = degenerate_findings(spec, {x}, {at::cumprod(x, 0)}, {at::cumprod(other, 0)});
  bool constant = false;
  for (const auto& f : findings) constant |= f.kind == "constant" && f.fraction >= 0.99;
  EXPECT_TRUE(constant);
}

TEST(DegenerateFindings, FlagsOutputsBelowTheTolerance) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::randn({1000}), other = at::randn({1000});
  // Every element below atol = 1e-4: an all-zero output would pass.
  const auto findings = degenerate_findings(spec, {x}, {x * 1e-6}, {other * 1e-6});
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].kind, "constant");
}

TEST(DegenerateFindings, FlagsAScalarThatIsTheSameForTwoSeeds) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::randn({1000}), other = at::randn({1000});
  const auto same = degenerate_findings(spec, {x}, {at::scalar_tensor(1.0f)}, {at::scalar_tensor(1.00001f)});
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0].kind, "seed_independent");
  EXPECT_TRUE(degenerate_findings(spec, {x}, {x.sum()}, {other.sum()}).empty());
}

TEST(DegenerateFindings, FlagsNonFiniteOutputs) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::randn({1000}), other = at::randn({1000});
  const auto findings = degenerate_findings(spec, {x}, {at::log(x)}, {at::log(other)});
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings[0].kind, "non_finite");
}

TEST(DegenerateFindings, IntegerOutputsMustVaryExactly) {
  const TaskSpec spec = spec_of(kUnarySpec);
  const at::Tensor x = at::randn({1000}), other = at::randn({1000});
  const at::Tensor rows = x.reshape({10, 100}), other_rows = other.reshape({10, 100});
  EXPECT_TRUE(degenerate_findings(spec, {x}, {rows.argmax(1)}, {other_rows.argmax(1)}).empty());
  const auto zeros = at::zeros({10}, at::kLong);
  const auto findings = degenerate_findings(spec, {x}, {zeros}, {zeros});
  ASSERT_EQ(findings.size(), 2u);  // constant, and the same for both seeds
  EXPECT_EQ(findings[0].kind, "constant");
  EXPECT_EQ(findings[1].kind, "seed_independent");
}

}  // namespace
}  // namespace crl
