// GPU tests of make_arguments: tensors are made on the GPU, deterministic there, with the right properties.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "program/arguments.h"

namespace crl {
namespace {

TEST(ArgumentsGpu, MadeOnTheDeviceDeterministicAndDistributedRight) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  const std::string text =
      "task: level1/001_t\ncategory: test\n"
      "inputs:\n"
      "  - {name: x, shape: [n, n], dtype: bfloat16, init: randn, post: [symmetric]}\n"
      "  - {name: p, shape: [n, n], dtype: float32, init: rand, post: ['softmax(0)']}\n"
      "  - {name: i, shape: [n], dtype: int64, init: 'randint(0, 10)'}\n"
      "params:\n"
      "  - {name: w, shape: [n, n], dtype: float16, init: 'uniform_fan_in(n)', post: [tril]}\n"
      "scales:\n  small: {n: 1024}\nflops: 1\nbytes: 1\n";
  const TaskSpec spec = parse_task_spec({true, text, 1}, "t.crl");
  const at::Device gpu(at::kCUDA, 0);
  const auto a = make_arguments(spec, "small", 5, gpu);
  const auto b = make_arguments(spec, "small", 5, gpu);
  const auto c = make_arguments(spec, "small", 6, gpu);
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(a[k].is_cuda());
    EXPECT_TRUE(at::equal(a[k], b[k])) << "argument " << k;
  }
  EXPECT_FALSE(at::equal(a[0], c[0]));
  EXPECT_TRUE(at::equal(a[0], a[0].transpose(0, 1)));
  EXPECT_NEAR(a[0].to(at::kDouble).std().item<double>(), 1 / std::sqrt(2.0), 0.01);
  EXPECT_TRUE(at::allclose(a[1].sum(0), at::ones({1024}, a[1].options()), 1e-5, 1e-5));
  EXPECT_EQ(a[2].min().item<int64_t>(), 0);
  EXPECT_EQ(a[2].max().item<int64_t>(), 9);
  EXPECT_TRUE(at::equal(a[3], a[3].tril()));
  EXPECT_LE(a[3].abs().max().item<float>(), 1 / 32.f);
}

}  // namespace
}  // namespace crl
