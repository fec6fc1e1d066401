// GPU tests of make_arguments: tensors are made on the GPU, deterministic there, with the right properties.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "program/arguments.h"
#include "program/edge_inputs.h"

#if CRL_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

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

// Edge trials on the GPU: deterministic there, the declared edges produced over several chunks, and
// no more device memory than the arguments themselves plus one chunk's temporaries.
TEST(ArgumentsGpu, EdgeArgumentsOnTheDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device on this machine";
  const std::string text =
      "task: level1/001_t\ncategory: test\n"
      "inputs:\n"
      "  - {name: x, shape: [n], dtype: float32, edges: [around(-1), around(1), zeros, large(50)]}\n"
      "  - {name: h, shape: [n], dtype: float16, init: rand, edges: [signs]}\n"
      "scales:\n  small: {n: 50000000}\nflops: 1\nbytes: 1\n";
  const TaskSpec spec = parse_task_spec({true, text, 1}, "t.crl");
  const at::Device gpu(at::kCUDA, 0);
  const auto a = make_edge_arguments(spec, "small", 5, gpu);
  const auto b = make_edge_arguments(spec, "small", 5, gpu);
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(a[k].is_cuda());
    EXPECT_TRUE(at::equal(a[k], b[k])) << "argument " << k;
  }
  const double share = kEdgeFraction / 4;
  EXPECT_NEAR(a[0].eq(1).to(at::kDouble).mean().item<double>(), share / 4, 0.002);
  EXPECT_NEAR(a[0].eq(0).to(at::kDouble).mean().item<double>(), share, 0.002);
  EXPECT_NEAR(a[0].abs().ge(50).to(at::kDouble).mean().item<double>(), share, 0.002);
  EXPECT_NEAR(a[1].lt(0).to(at::kDouble).mean().item<double>(), kEdgeFraction, 0.002);
  // The last chunk got its edges too.
  EXPECT_NEAR(a[0].narrow(0, 49000000, 1000000).eq(0).to(at::kDouble).mean().item<double>(), share, 0.002);
  // In place: applying the edges to the normal tensor gives the edge trial's tensor, and the device
  // memory needed on top of it is one chunk's temporaries (~40 bytes per element), not the tensor's.
  at::Tensor x = make_arguments(spec, "small", 5, gpu)[0];
#if CRL_HAVE_CUDA
  namespace allocator = c10::cuda::CUDACachingAllocator;
  allocator::resetPeakStats(0);
  const int64_t before = allocator::getDeviceStats(0).allocated_bytes[0].current;
#endif
  apply_edges(spec, spec.inputs[0], "small", argument_stream_seed(spec, 5, 0), x);
  EXPECT_TRUE(at::equal(x, a[0]));
#if CRL_HAVE_CUDA
  const int64_t extra = allocator::getDeviceStats(0).allocated_bytes[0].peak - before;
  EXPECT_LE(extra, 48 * kEdgeChunkElements) << "edge temporaries took " << extra << " bytes";
  EXPECT_LT(extra, x.numel() * 4);
#endif
}

}  // namespace
}  // namespace crl
