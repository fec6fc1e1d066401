// Tests of make_arguments on the CPU: shapes, dtypes, determinism, streams, distributions, post ops.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <set>

#include "core/error.h"
#include "program/arguments.h"

namespace crl {
namespace {

TaskSpec spec_from(const std::string& tensors, const std::string& scale = "{n: 64, m: 32}") {
  const std::string text = "task: level1/001_t\ncategory: test\n" + tensors + "scales:\n  small: " + scale +
                           "\nflops: 1\nbytes: 1\n";
  return parse_task_spec({true, text, 1}, "t.crl");
}

const at::Device kCpu(at::kCPU);

TEST(Arguments, ShapesDtypesOrderAndContiguity) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: a, shape: [n, m], dtype: float32, init: randn}\n"
      "  - {name: idx, shape: [m], dtype: int64, init: 'randint(0, n)'}\n"
      "params:\n"
      "  - {name: h, shape: [2, n // 2, 3], dtype: float16, init: rand}\n"
      "  - {name: b, shape: [m], dtype: bfloat16, init: zeros}\n"
      "  - {name: mask, shape: [n], dtype: bool, init: 'randint(0, 2)'}\n"
      "  - {name: i, shape: [], dtype: int32, init: 'full(7)'}\n");
  const auto args = make_arguments(spec, "small", 1, kCpu);
  ASSERT_EQ(args.size(), 6u);
  EXPECT_EQ(args[0].sizes(), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(args[0].scalar_type(), at::kFloat);
  EXPECT_EQ(args[1].scalar_type(), at::kLong);
  EXPECT_EQ(args[2].sizes(), (std::vector<int64_t>{2, 32, 3}));
  EXPECT_EQ(args[2].scalar_type(), at::kHalf);
  EXPECT_EQ(args[3].scalar_type(), at::kBFloat16);
  EXPECT_EQ(args[4].scalar_type(), at::kBool);
  EXPECT_EQ(args[5].dim(), 0);
  EXPECT_EQ(args[5].item<int>(), 7);
  for (const auto& t : args) {
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(t.device().is_cpu());
  }
  EXPECT_GE(args[1].min().item<int64_t>(), 0);
  EXPECT_LT(args[1].max().item<int64_t>(), 64);
  EXPECT_EQ(args[3].abs().sum().item<float>(), 0.f);
}

TEST(Arguments, DeterministicPerSeedAndIndependentStreams) {
  const std::string inputs = "inputs:\n  - {name: x, shape: [n, m], dtype: float32, init: randn}\n"
                             "  - {name: y, shape: [n], dtype: float32, init: randn}\n";
  const TaskSpec spec = spec_from(inputs);
  const auto first = make_arguments(spec, "small", 42, kCpu);
  const auto again = make_arguments(spec, "small", 42, kCpu);
  const auto other = make_arguments(spec, "small", 43, kCpu);
  EXPECT_TRUE(at::equal(first[0], again[0]));
  EXPECT_TRUE(at::equal(first[1], again[1]));
  EXPECT_FALSE(at::equal(first[0], other[0]));
  // Two tensors of one call draw from different streams, not the same prefix.
  EXPECT_FALSE(at::equal(first[0].flatten().slice(0, 0, 64), first[1]));
  // Adding a param changes no input.
  const TaskSpec with_param =
      spec_from(inputs + "params:\n  - {name: w, shape: [m], dtype: float32, init: randn}\n");
  const auto more = make_arguments(with_param, "small", 42, kCpu);
  ASSERT_EQ(more.size(), 3u);
  EXPECT_TRUE(at::equal(first[0], more[0]));
  EXPECT_TRUE(at::equal(first[1], more[1]));
}

TEST(Arguments, StreamSeedsNeverRepeatAcrossSeedsAndTensors) {
  // Trials use consecutive seeds: no tensor of one trial may reappear as another tensor of the next.
  const TaskSpec spec = spec_from(
      "inputs:\n  - {name: x, shape: [n], dtype: float32, init: randn}\n"
      "  - {name: y, shape: [n], dtype: float32, init: randn}\n"
      "params:\n  - {name: w, shape: [n], dtype: float32, init: randn}\n");
  std::set<uint64_t> seen;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    for (size_t i = 0; i < spec.num_args(); ++i) {
      EXPECT_TRUE(seen.insert(argument_stream_seed(spec, seed, i)).second) << "seed " << seed << " tensor " << i;
    }
  }
  const auto one = make_arguments(spec, "small", 1, kCpu);
  const auto two = make_arguments(spec, "small", 2, kCpu);
  EXPECT_FALSE(at::equal(one[1], two[0]));
}

TEST(Arguments, DistributionsAreRoughlyRight) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: a, shape: [n], dtype: float32, init: randn}\n"
      "  - {name: b, shape: [n], dtype: float32, init: rand}\n"
      "  - {name: c, shape: [n], dtype: float32, init: 'uniform(-3, 5)'}\n"
      "  - {name: d, shape: [n], dtype: float32, init: 'normal(2, 0.5)'}\n"
      "  - {name: e, shape: [n], dtype: float32, init: 'uniform_fan_in(m)'}\n"
      "  - {name: f, shape: [n], dtype: int32, init: 'randint(-4, 4)'}\n"
      "  - {name: g, shape: [n], dtype: bfloat16, init: randn}\n",
      "{n: 200000, m: 100}");
  const auto args = make_arguments(spec, "small", 7, kCpu);
  const auto mean = [](const at::Tensor& t) { return t.to(at::kDouble).mean().item<double>(); };
  const auto stdev = [](const at::Tensor& t) { return t.to(at::kDouble).std().item<double>(); };
  EXPECT_NEAR(mean(args[0]), 0, 0.01);
  EXPECT_NEAR(stdev(args[0]), 1, 0.01);
  EXPECT_GE(args[1].min().item<float>(), 0.f);
  EXPECT_LT(args[1].max().item<float>(), 1.f);
  EXPECT_NEAR(mean(args[1]), 0.5, 0.01);
  EXPECT_GE(args[2].min().item<float>(), -3.f);
  EXPECT_LT(args[2].max().item<float>(), 5.f);
  EXPECT_NEAR(mean(args[2]), 1, 0.05);
  EXPECT_NEAR(mean(args[3]), 2, 0.01);
  EXPECT_NEAR(stdev(args[3]), 0.5, 0.01);
  EXPECT_LE(args[4].abs().max().item<float>(), 0.1f);   // 1 / sqrt(100)
  EXPECT_GT(args[4].abs().max().item<float>(), 0.099f);
  EXPECT_EQ(args[5].min().item<int>(), -4);
  EXPECT_EQ(args[5].max().item<int>(), 3);
  EXPECT_NEAR(stdev(args[6]), 1, 0.02);
}

TEST(Arguments, PostOpsHaveTheirExactProperties) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: lower, shape: [3, n, n], dtype: float32, init: randn, post: [tril]}\n"
      "  - {name: upper, shape: [n, n], dtype: float16, init: randn, post: [triu]}\n"
      "  - {name: sym, shape: [2, n, n], dtype: float32, init: randn, post: [symmetric]}\n"
      "  - {name: probs, shape: [m, n], dtype: float32, init: randn, post: ['softmax(-1)']}\n"
      "  - {name: pos, shape: [n], dtype: float32, init: randn, post: [abs, 'add(1)', 'mul(2)']}\n"
      "  - {name: ints, shape: [n], dtype: int64, init: 'randint(0, 5)', post: ['mul(3)', 'add(-1)']}\n");
  const auto args = make_arguments(spec, "small", 3, kCpu);
  EXPECT_TRUE(at::equal(args[0], args[0].tril()));
  EXPECT_FALSE(at::equal(args[0], args[0].triu()));
  EXPECT_TRUE(at::equal(args[1], args[1].triu()));
  EXPECT_TRUE(at::equal(args[2], args[2].transpose(-1, -2)));
  EXPECT_TRUE(at::allclose(args[3].sum(-1), at::ones({32}), 1e-5, 1e-5));
  EXPECT_GE(args[3].min().item<float>(), 0.f);
  EXPECT_GE(args[4].min().item<float>(), 2.f);
  const auto ints = args[5];
  EXPECT_TRUE(at::equal(at::remainder(ints + 1, 3), at::zeros_like(ints)));
  EXPECT_GE(ints.min().item<int64_t>(), -1);
  EXPECT_LE(ints.max().item<int64_t>(), 11);
}

// fill_arguments writes make_arguments' values into tensors that already exist (the hack guards'
// new values at the same addresses), for every init kind and post op, and nowhere else.
TEST(Arguments, FillArgumentsWritesTheSameValuesInPlace) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: a, shape: [m, n], dtype: float32, init: randn}\n"
      "  - {name: b, shape: [n], dtype: float16, init: rand}\n"
      "  - {name: c, shape: [n], dtype: float32, init: 'uniform(-2, 3)'}\n"
      "  - {name: d, shape: [n], dtype: bfloat16, init: 'normal(1, 2)'}\n"
      "  - {name: e, shape: [m, n], dtype: float32, init: 'uniform_fan_in(n)'}\n"
      "  - {name: f, shape: [n], dtype: int64, init: 'randint(0, 5)', post: ['mul(3)', 'add(-1)']}\n"
      "  - {name: g, shape: [n], dtype: float32, init: ones, post: ['mul_rand(2, 3)']}\n"
      "  - {name: h, shape: [n], dtype: float32, init: zeros}\n"
      "  - {name: i, shape: [n], dtype: float32, init: 'full(2.5)'}\n"
      "  - {name: j, shape: [2, n, n], dtype: float32, init: randn, post: [symmetric]}\n"
      "  - {name: k, shape: [m, n], dtype: float32, init: randn, post: ['softmax(-1)', abs]}\n"
      "  - {name: l, shape: [n, n], dtype: float32, init: randn, post: [tril]}\n"
      "params:\n"
      "  - {name: w, shape: [m, n], dtype: float32, init: randn}\n");
  const auto expected = make_arguments(spec, "small", 9, kCpu);
  auto into = make_arguments(spec, "small", 4, kCpu);  // other values, to be overwritten
  std::vector<const void*> places;
  for (const auto& t : into) places.push_back(t.const_data_ptr());
  fill_arguments(spec, "small", 9, into);
  ASSERT_EQ(into.size(), expected.size());
  for (size_t i = 0; i < into.size(); ++i) {
    EXPECT_TRUE(at::equal(into[i], expected[i])) << "argument " << i;
    EXPECT_EQ(into[i].const_data_ptr(), places[i]) << "argument " << i << " moved";
  }
  // A destination of another shape, dtype or count is refused, not resized.
  auto wrong = make_arguments(spec, "small", 4, kCpu);
  wrong[0] = at::zeros({3}, at::kFloat);
  EXPECT_THROW(fill_arguments(spec, "small", 9, wrong), InputError);
  wrong.pop_back();
  EXPECT_THROW(fill_arguments(spec, "small", 9, wrong), InputError);
}

TEST(Arguments, MulRandScalesTheWholeTensorByOneSeededScalar) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: plain, shape: [m, n], dtype: float32, init: ones}\n"
      "  - {name: scaled, shape: [m, n], dtype: float32, init: ones, post: ['mul_rand(2, 3)']}\n");
  const auto a = make_arguments(spec, "small", 5, kCpu);
  const float factor = a[1].flatten()[0].item<float>();
  EXPECT_GE(factor, 2.f);
  EXPECT_LT(factor, 3.f);
  EXPECT_TRUE(at::equal(a[1], at::full_like(a[1], factor)));  // one scalar for every element
  EXPECT_TRUE(at::equal(a[0], at::ones_like(a[0])));
  // The same seed gives the same scalar; other seeds give others, so means differ between seeds.
  EXPECT_EQ(make_arguments(spec, "small", 5, kCpu)[1].flatten()[0].item<float>(), factor);
  std::set<float> factors;
  for (uint64_t seed = 10; seed < 20; ++seed) factors.insert(make_arguments(spec, "small", seed, kCpu)[1].flatten()[0].item<float>());
  EXPECT_EQ(factors.size(), 10u);
}

TEST(Arguments, SpreadSamplesScalesEachSampleOfContinuousInputsOnly) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: x, shape: [m, n], dtype: float32, init: randn}\n"
      "  - {name: lower, shape: [n, n], dtype: float32, init: randn, post: [tril]}\n"
      "  - {name: ones, shape: [m, n], dtype: float32, init: ones}\n"
      "  - {name: ids, shape: [m], dtype: int64, init: 'randint(0, 5)'}\n"
      "params:\n"
      "  - {name: w, shape: [m, n], dtype: float32, init: randn}\n");
  const auto plain = make_arguments(spec, "small", 4, kCpu);
  auto spread = make_arguments(spec, "small", 4, kCpu);
  EXPECT_EQ(spread_samples(spec, spread), 1u);  // only x: the others are structured, constant, integer or a param
  for (size_t i = 1; i < plain.size(); ++i) EXPECT_TRUE(at::equal(plain[i], spread[i])) << i;
  const int64_t m = plain[0].size(0);
  const at::Tensor factors = (spread[0] / plain[0]).mean(1);  // one factor per sample
  EXPECT_NEAR(factors[0].item<double>(), 0.9, 1e-5);
  EXPECT_NEAR(factors[m - 1].item<double>(), 1.1, 1e-5);
  EXPECT_TRUE(at::allclose(spread[0], plain[0] * factors.unsqueeze(1), 1e-5, 1e-6));
}

TEST(Arguments, CudaDeviceIsRejectedCleanlyWithoutAGpuOrWorksWithOne) {
  const TaskSpec spec = spec_from("inputs:\n  - {name: x, shape: [n], dtype: float32, init: randn}\n");
  if (!at::hasCUDA()) {
    EXPECT_ANY_THROW(make_arguments(spec, "small", 1, at::Device(at::kCUDA, 0)));
    GTEST_SKIP() << "no CUDA device on this machine: on-GPU generation is covered by the gpu-labelled test";
  }
  const auto a = make_arguments(spec, "small", 1, at::Device(at::kCUDA, 0));
  EXPECT_TRUE(a[0].is_cuda());
}

}  // namespace
}  // namespace crl
