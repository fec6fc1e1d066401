// Output comparison: count, shape, dtype, device, tolerances by dtype, NaN/Inf, worst element.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "eval/output_comparison.h"

namespace crl::eval {
namespace {

std::vector<ProgramOutput> cpu(std::vector<at::Tensor> tensors) {
  std::vector<ProgramOutput> out;
  for (auto& t : tensors) out.push_back({t, "cpu"});
  return out;
}

TEST(OutputComparison, IdenticalOutputsMatch) {
  const at::Tensor a = at::randn({4, 5});
  const auto r = compare_outputs(cpu({a, a.to(at::kLong)}), cpu({a.clone(), a.to(at::kLong)}));
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(OutputComparison, CountShapeDtypeAndDeviceAreChecked) {
  const at::Tensor a = at::randn({4, 5});
  EXPECT_NE(compare_outputs(cpu({a}), cpu({a, a})).message.find("returned 2 outputs"), std::string::npos);
  EXPECT_NE(compare_outputs(cpu({a}), cpu({a.view({5, 4})})).message.find("shape"), std::string::npos);
  EXPECT_NE(compare_outputs(cpu({a}), cpu({a.to(at::kDouble)})).message.find("dtype"), std::string::npos);
  const auto r = compare_outputs(cpu({a}), {{a, "cuda"}});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("device"), std::string::npos) << r.message;
}

TEST(OutputComparison, Float32ToleranceIsOneInTenThousand) {
  const at::Tensor a = at::ones({100});
  EXPECT_TRUE(compare_outputs(cpu({a}), cpu({a + 1e-4})).ok);
  const auto r = compare_outputs(cpu({a}), cpu({a.index_put({at::tensor(int64_t{37})}, at::tensor(1.001f))}));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, 37);
  EXPECT_NEAR(r.worst_candidate, 1.001, 1e-6);
  EXPECT_DOUBLE_EQ(r.worst_reference, 1.0);
  EXPECT_EQ(r.mismatched_elements, 1);
  EXPECT_NE(r.message.find("flat index 37"), std::string::npos) << r.message;
}

TEST(OutputComparison, HalfPrecisionGetsOneInAHundred) {
  const at::Tensor a = at::ones({10}, at::kHalf);
  EXPECT_TRUE(compare_outputs(cpu({a}), cpu({a * 1.005})).ok);
  EXPECT_FALSE(compare_outputs(cpu({a}), cpu({a * 1.05})).ok);
  const at::Tensor b = at::ones({10}, at::kBFloat16);
  EXPECT_TRUE(compare_outputs(cpu({b}), cpu({b * 1.0078125})).ok);
}

TEST(OutputComparison, IntegersMustMatchExactly) {
  const at::Tensor a = at::arange(10);
  EXPECT_FALSE(compare_outputs(cpu({a}), cpu({a + 1})).ok);
  EXPECT_TRUE(compare_outputs(cpu({a.gt(4)}), cpu({a.gt(4)})).ok);
}

TEST(OutputComparison, TaskToleranceOverridesTheDefault) {
  const at::Tensor a = at::ones({10});
  const auto loose = [](at::ScalarType) { return Tolerance{0.1, 0.1}; };
  EXPECT_TRUE(compare_outputs(cpu({a}), cpu({a * 1.05}), loose).ok);
}

TEST(OutputComparison, NanAndInfinityRules) {
  const at::Tensor ref = at::tensor({1.0f, NAN, INFINITY, -INFINITY});
  EXPECT_TRUE(compare_outputs(cpu({ref}), cpu({ref.clone()})).ok);
  const auto nan_where_number = compare_outputs(cpu({ref}), cpu({at::tensor({NAN, NAN, INFINITY, -INFINITY})}));
  EXPECT_FALSE(nan_where_number.ok);
  EXPECT_EQ(nan_where_number.worst_index, 0);
  EXPECT_FALSE(compare_outputs(cpu({ref}), cpu({at::tensor({1.0f, 2.0f, INFINITY, -INFINITY})})).ok);
  EXPECT_FALSE(compare_outputs(cpu({ref}), cpu({at::tensor({1.0f, NAN, -INFINITY, -INFINITY})})).ok);
  EXPECT_FALSE(compare_outputs(cpu({ref}), cpu({at::tensor({1.0f, NAN, 1e30f, -INFINITY})})).ok);
}

}  // namespace
}  // namespace crl::eval
