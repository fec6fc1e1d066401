// Output comparison: count, shape, dtype, device, tolerances by dtype, NaN/Inf, worst element.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "worker/output_comparison.h"

namespace crl::worker {
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

// Large outputs are compared in parallel pieces: the counts, the worst element (the first of
// equal ones) and the largest error must not depend on how the range was split.
TEST(OutputComparison, LargeOutputsReportTheSameWorstElementAndCounts) {
  const at::Tensor ref = at::randn({3, 1 << 20});
  at::Tensor cand = ref.clone();
  const auto flat = cand.view(-1);
  flat[70000] = ref.view(-1)[70000].item<float>() + 0.5f;    // bad
  flat[2000000] = ref.view(-1)[2000000].item<float>() + 3.f;  // the worst
  flat[3000000] = ref.view(-1)[3000000].item<float>() + 1.f;  // bad
  flat[3100000] = NAN;                                         // breaks the NaN rule: worse than any number
  auto r = compare_outputs(cpu({ref}), cpu({cand}));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatched_elements, 4);
  EXPECT_EQ(r.worst_index, 3100000);
  EXPECT_NEAR(r.max_abs_error, 3.0, 1e-5);  // NaN's error is not a number: left out
  flat[3100000] = ref.view(-1)[3100000];
  r = compare_outputs(cpu({ref}), cpu({cand}));
  EXPECT_EQ(r.mismatched_elements, 3);
  EXPECT_EQ(r.worst_index, 2000000);
  // Within tolerance everywhere: ok, with the largest error reported.
  const at::Tensor close = ref * (1 + 5e-5);
  r = compare_outputs(cpu({ref}), cpu({close}));
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_NEAR(r.max_abs_error, (close - ref).abs().max().item<double>(), 1e-9);
}

TEST(OutputComparison, LargeInt64ValuesCompareExactly) {
  const int64_t big = (int64_t{1} << 60) + 1;  // not representable in float64
  const at::Tensor a = at::full({4}, big, at::kLong);
  EXPECT_TRUE(compare_outputs(cpu({a}), cpu({a.clone()})).ok);
  EXPECT_FALSE(compare_outputs(cpu({a}), cpu({a + 1})).ok);  // equal as float64, unequal as integers
}

TEST(OutputComparison, SameBytesOnTheCpuComparesBitsAndRefusesDifferentSizes) {
  const at::Tensor a = at::randn({1001});
  EXPECT_TRUE(same_bytes(a, a.clone()));
  at::Tensor b = a.clone();
  b[1000].add_(1);
  EXPECT_FALSE(same_bytes(a, b));
  const at::Tensor m = at::randn({31, 33});
  EXPECT_TRUE(same_bytes(m.t(), m.t().contiguous()));  // by value order, whatever the strides
  EXPECT_FALSE(same_bytes(m.t(), m.contiguous()));
  EXPECT_FALSE(same_bytes(at::tensor({0.0f}), at::tensor({-0.0f})));
  EXPECT_FALSE(same_bytes(a, a.narrow(0, 0, 10)));
  EXPECT_FALSE(same_bytes(a, a.to(at::kDouble)));
}

}  // namespace
}  // namespace crl::worker
