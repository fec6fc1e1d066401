// The judge's one-pass comparison on the GPU gives what the CPU pass gives, to the bit: the counts,
// the largest error and the worst element, for every dtype, at the tolerance's edge, with NaN,
// infinities, integers beyond 2^53, non-contiguous references and outputs of many blocks (label
// gpu; skipped without a GPU).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "worker/output_comparison.h"
#include "machine/machine_probe.h"

namespace crl::worker {
namespace {

ComparisonResult compare_on(const std::string& device, const at::Tensor& ref, const at::Tensor& cand, double atol, double rtol) {
  const auto tol = [&](at::ScalarType) { return Tolerance{atol, rtol}; };
  const at::Device d = device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  return compare_outputs({{ref.to(d), device}}, {{cand.to(d), device}}, tol);
}

// Equal, NaN equal to NaN (a worst element may be NaN on both sides).
::testing::AssertionResult same_value(double gpu, double cpu) {
  if ((std::isnan(gpu) && std::isnan(cpu)) || gpu == cpu) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gpu " << gpu << " != cpu " << cpu;
}

// Both sides' results equal, field by field (no tolerance: the same float64 arithmetic).
void expect_same_on_gpu_and_cpu(const at::Tensor& ref, const at::Tensor& cand, double atol = 1e-4, double rtol = 1e-4) {
  const ComparisonResult cpu = compare_on("cpu", ref, cand, atol, rtol);
  const ComparisonResult gpu = compare_on("cuda", ref, cand, atol, rtol);
  EXPECT_EQ(gpu.ok, cpu.ok) << "gpu: " << gpu.message << "\ncpu: " << cpu.message;
  EXPECT_EQ(gpu.mismatched_elements, cpu.mismatched_elements);
  EXPECT_TRUE(same_value(gpu.max_abs_error, cpu.max_abs_error));
  EXPECT_EQ(gpu.message, cpu.message);
  if (!cpu.ok) {
    EXPECT_EQ(gpu.worst_index, cpu.worst_index);
    EXPECT_TRUE(same_value(gpu.worst_reference, cpu.worst_reference));
    EXPECT_TRUE(same_value(gpu.worst_candidate, cpu.worst_candidate));
  }
}

class GpuOutputComparison : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_visible()) GTEST_SKIP() << "no CUDA GPU visible: the GPU comparison cannot run here";
  }
};

TEST_F(GpuOutputComparison, FloatingTypesGiveTheCpuResultsToTheBit) {
  at::manual_seed(7);
  for (const auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    const at::Tensor ref = at::randn({5, 300001}).to(dtype);  // several blocks, a ragged end
    expect_same_on_gpu_and_cpu(ref, ref.clone());
    // Noise around the tolerance's edge: some in, some out, ties in the worst excess likely.
    const at::Tensor noise = (at::rand({5, 300001}) - 0.5) * 4e-4 * (1 + ref.to(at::kFloat).abs());
    expect_same_on_gpu_and_cpu(ref, (ref.to(at::kFloat) + noise).to(dtype));
    expect_same_on_gpu_and_cpu(ref, (ref.to(at::kFloat) + noise).to(dtype), 1e-2, 1e-2);
  }
}

TEST_F(GpuOutputComparison, NanInfinityAndTheFirstOfEqualWorstElements) {
  const at::Tensor ref = at::tensor({1.0f, NAN, INFINITY, -INFINITY, 2.0f, 2.0f, 0.0f});
  expect_same_on_gpu_and_cpu(ref, ref.clone());
  expect_same_on_gpu_and_cpu(ref, at::tensor({NAN, NAN, INFINITY, -INFINITY, 2.0f, 2.0f, 0.0f}));
  expect_same_on_gpu_and_cpu(ref, at::tensor({1.0f, 2.0f, -INFINITY, -INFINITY, 2.0f, 2.0f, 0.0f}));
  expect_same_on_gpu_and_cpu(ref, at::tensor({1.0f, NAN, INFINITY, -INFINITY, 3.0f, 3.0f, 1e30f}));  // two equal, then a worse
  expect_same_on_gpu_and_cpu(ref, at::tensor({1.0f, NAN, INFINITY, -INFINITY, 3.0f, 3.0f, 0.0f}));   // two equal: the first
  // Equal worst elements far apart (different blocks): the first is reported.
  at::Tensor big = at::zeros({1 << 22});
  at::Tensor cand = big.clone();
  cand[4000000] = 1.0f;
  cand[100] = 1.0f;
  cand[2000000] = 1.0f;
  expect_same_on_gpu_and_cpu(big, cand);
  EXPECT_EQ(compare_on("cuda", big, cand, 1e-4, 1e-4).worst_index, 100);
}

TEST_F(GpuOutputComparison, IntegersAndBoolAreExact) {
  at::manual_seed(3);
  for (const auto dtype : {at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kBool}) {
    const at::Tensor ref = at::randint(0, 2, {1 << 18}).to(dtype);
    at::Tensor cand = ref.clone();
    expect_same_on_gpu_and_cpu(ref, cand, 0, 0);
    if (dtype == at::kBool) {
      cand[12345].fill_(!ref[12345].item<bool>());
    } else {
      cand[12345].add_(1);
    }
    expect_same_on_gpu_and_cpu(ref, cand, 0, 0);
  }
  const int64_t big = (int64_t{1} << 60) + 1;  // equal as float64 to its neighbour, unequal as integers
  const at::Tensor a = at::full({4}, big, at::kLong);
  expect_same_on_gpu_and_cpu(a, a + 1, 0, 0);
  EXPECT_FALSE(compare_on("cuda", a, a + 1, 0, 0).ok);
}

TEST_F(GpuOutputComparison, ANonContiguousReferenceIsComparedByItsValues) {
  const at::Tensor ref = at::randn({257, 129}).t();
  expect_same_on_gpu_and_cpu(ref, ref.contiguous());
  expect_same_on_gpu_and_cpu(ref, ref.contiguous() + 1e-3);
}

// The precision contract's form (a float64 reference's error and error scale beside the float32
// output, each element bounded by its block's largest scale): the same elements outside, the same worst element, the same precision ratio (its sums
// joined in another order: equal to 1e-12).
TEST_F(GpuOutputComparison, TheFloat64FormGivesTheCpuResults) {
  at::manual_seed(11);
  const at::Device gpu(at::kCUDA, 0);
  const at::Tensor ref = at::randn({3, 400003});
  const at::Tensor delta = (at::randn({3, 400003}) * 1e-7).to(at::kBFloat16);
  // A tenth of the scales zero, so each element's bound is its block's largest (the GPU's reduction
  // over a block of threads, the CPU's over a block of elements; 1200009 elements end in a partial block).
  const at::Tensor scale = ((delta.to(at::kFloat).abs() + 1e-7) * (at::rand({3, 400003}) > 0.1).to(at::kFloat)).to(at::kBFloat16);
  for (const double noise : {0.0, 1e-6, 3e-4, 3e-3}) {
    const at::Tensor cand = ref + at::randn({3, 400003}) * noise;
    const ComparisonResult cpu = compare_outputs({{ref, "cpu", delta, scale}}, {{cand, "cpu"}});
    const ComparisonResult on_gpu =
        compare_outputs({{ref.to(gpu), "cuda", delta.to(gpu), scale.to(gpu)}}, {{cand.to(gpu), "cuda"}});
    EXPECT_EQ(on_gpu.ok, cpu.ok) << noise;
    EXPECT_EQ(on_gpu.mismatched_elements, cpu.mismatched_elements) << noise;
    EXPECT_EQ(on_gpu.worst_index, cpu.worst_index) << noise;
    EXPECT_NEAR(on_gpu.precision_ratio, cpu.precision_ratio, 1e-12 * std::max(1.0, cpu.precision_ratio)) << noise;
  }
}

TEST_F(GpuOutputComparison, SameBytesSeesOneChangedByteAnywhere) {
  const at::Device gpu(at::kCUDA, 0);
  const at::Tensor a = at::randint(0, 256, {(1 << 22) + 13}, at::TensorOptions().dtype(at::kByte)).to(gpu);  // many blocks, a tail
  EXPECT_TRUE(same_bytes(a, a.clone()));
  for (const int64_t at_byte : {int64_t{0}, int64_t{1} << 21, a.numel() - 1}) {  // first, middle, the tail's last
    at::Tensor b = a.clone();
    b[at_byte].add_(1);
    EXPECT_FALSE(same_bytes(a, b)) << "byte " << at_byte;
  }
  // Pointers that are not 16-byte aligned take the byte path.
  const at::Tensor x = a.narrow(0, 1, 1 << 20), y = a.clone().narrow(0, 1, 1 << 20);
  EXPECT_TRUE(same_bytes(x, y));
  at::Tensor z = y.clone();
  z[777].add_(1);
  EXPECT_FALSE(same_bytes(x, z));
  // Floats by their bits: -0.0 and 0.0 differ, a NaN equals itself.
  const at::Tensor f = at::tensor({0.0f, NAN}).to(gpu);
  EXPECT_TRUE(same_bytes(f, f.clone()));
  EXPECT_FALSE(same_bytes(f, at::tensor({-0.0f, NAN}).to(gpu)));
  EXPECT_FALSE(same_bytes(a, a.narrow(0, 0, 5)));
  // A GPU tensor against its host copy (the judge's copies of inputs over 1 GiB), by chunks.
  EXPECT_TRUE(same_bytes(a, a.cpu()));
  at::Tensor host = a.cpu();
  host[a.numel() - 1].add_(1);
  EXPECT_FALSE(same_bytes(a, host));
}

}  // namespace
}  // namespace crl::worker
