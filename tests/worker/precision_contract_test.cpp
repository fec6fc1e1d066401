// The precision contract on the CPU (lib/worker/float64_reference.h, output_comparison.h): the
// float64 reference made whole or in chunks of samples, and the comparison that holds a float32
// output to it: legitimate float32 programs (another summation order, a TF32x3 split) pass; TF32,
// fp16 and bf16 numerics fail, also where the task's fixed tolerance would let them through.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "worker/compare_rule.h"
#include "worker/float64_reference.h"
#include "worker/output_comparison.h"

namespace crl::worker {
namespace {

TaskSpec matmul_spec() {
  const std::string text =
      "task: level1/001_t\ncategory: test\ninputs:\n"
      "  - {name: a, shape: [n, k], dtype: float32, init: rand}\n"
      "  - {name: b, shape: [k, n], dtype: float32, init: rand}\n"
      "scales:\n  small: {n: 64, k: 1024}\nflops: 1\nbytes: 1\n";
  return parse_task_spec({true, text, 1}, "t.crl");
}

std::vector<at::Tensor> matmul(const std::vector<at::Tensor>& args) { return {at::matmul(args[0], args[1])}; }

at::Tensor to_tf32(const at::Tensor& x) { return x.contiguous().view(at::kInt).add(0x1000).bitwise_and(~0x1FFF).view(at::kFloat); }

// Copies of the arguments: float64_reference nudges the ones it is given in place.
std::vector<at::Tensor> copies(const std::vector<at::Tensor>& args) {
  std::vector<at::Tensor> out;
  for (const auto& a : args) out.push_back(a.clone());
  return out;
}

// The reference's outputs with their float64 errors, as the judge holds them.
std::vector<ProgramOutput> held(const ProgramRun& run, const TaskSpec& spec, const std::vector<at::Tensor>& args) {
  const std::vector<at::Tensor> r32 = run(args);
  const Float64Reference f = float64_reference(run, spec, copies(args), r32, [] {});
  EXPECT_EQ(f.missing, "");
  std::vector<ProgramOutput> out;
  for (size_t i = 0; i < r32.size(); ++i) out.push_back({r32[i], "cpu", f.deltas.at(i), f.scales.at(i)});
  return out;
}

ComparisonResult judged(const std::vector<ProgramOutput>& reference, const at::Tensor& candidate) {
  return compare_outputs(reference, {{candidate, "cpu"}});
}

TEST(Float64Reference, TheErrorIsTheFloat32ReferencesAgainstFloat64) {
  const TaskSpec spec = matmul_spec();
  const std::vector<at::Tensor> args = {at::rand({64, 1024}), at::rand({1024, 64})};
  const auto r32 = matmul(args);
  const Float64Reference f = float64_reference(matmul, spec, copies(args), r32, [] {});
  ASSERT_EQ(f.missing, "");
  EXPECT_EQ(f.runs, 1);
  ASSERT_EQ(f.deltas.size(), 1u);
  EXPECT_EQ(f.deltas[0].scalar_type(), at::kBFloat16);
  const at::Tensor truth = at::matmul(args[0].to(at::kDouble), args[1].to(at::kDouble));
  const at::Tensor rebuilt = r32[0].to(at::kDouble) + f.deltas[0].to(at::kDouble);
  // float64 = float32 + error, to within bfloat16's rounding of the error
  EXPECT_LE((rebuilt - truth).abs().max().item<double>(), (truth - r32[0].to(at::kDouble)).abs().max().item<double>() / 100);
  // the scale is at least the error, and not zero where the output depends on rounding
  EXPECT_TRUE(f.scales[0].to(at::kFloat).ge(f.deltas[0].to(at::kFloat).abs()).all().item<bool>());
  EXPECT_GT(f.scales[0].to(at::kFloat).mean().item<double>(), 0);
}

// Where the float64 run does not fit (here: more than 16 samples at once), chunks of samples;
// outputs that are not per sample are refused rather than trusted.
TEST(Float64Reference, OutOfMemoryRunsInChunksOfSamplesWhereTheOutputsArePerSample) {
  const TaskSpec spec = matmul_spec();
  const std::vector<at::Tensor> args = {at::rand({64, 1024}), at::rand({1024, 64})};
  int released = 0;
  const ProgramRun small_only = [](const std::vector<at::Tensor>& a) {
    if (a[0].scalar_type() == at::kDouble && a[0].size(0) > 16) throw Error("CUDA out of memory (test)");
    return matmul(a);
  };
  const auto r32 = matmul(args);
  const Float64Reference chunked = float64_reference(small_only, spec, copies(args), r32, [&] { ++released; });
  ASSERT_EQ(chunked.missing, "");
  EXPECT_EQ(chunked.runs, 1 + 4);  // whole (out of memory), halves (out of memory at the first), quarters
  EXPECT_EQ(released, 2);
  const Float64Reference whole = float64_reference(matmul, spec, copies(args), r32, [] {});
  const at::Tensor d_chunked = chunked.deltas[0].to(at::kFloat), d_whole = whole.deltas[0].to(at::kFloat);
  EXPECT_LE((d_chunked - d_whole).abs().max().item<double>(), 0.02 * d_whole.abs().max().item<double>());
  // A batch statistic is not per sample: made a chunk at a time it differs, and is not kept.
  const ProgramRun centred = [](const std::vector<at::Tensor>& a) {
    if (a[0].scalar_type() == at::kDouble && a[0].size(0) > 16) throw Error("CUDA out of memory (test)");
    const at::Tensor y = at::matmul(a[0], a[1]);
    return std::vector<at::Tensor>{y - y.mean(0, true)};
  };
  const Float64Reference refused = float64_reference(centred, spec, copies(args), centred(args), [] {});
  EXPECT_NE(refused.missing.find("not independent"), std::string::npos) << refused.missing;
  EXPECT_FALSE(refused.deltas.at(0).defined());
}

TEST(Float64Reference, AReferenceThatDoesNotRunInFloat64SaysSo) {
  const TaskSpec spec = matmul_spec();
  const std::vector<at::Tensor> args = {at::rand({64, 1024}), at::rand({1024, 64})};
  const ProgramRun float_only = [](const std::vector<at::Tensor>& a) {
    TORCH_CHECK(a[0].scalar_type() == at::kFloat, "expected float");
    return matmul(a);
  };
  const Float64Reference f = float64_reference(float_only, spec, args, matmul(args), [] {});
  EXPECT_NE(f.missing.find("does not run in float64"), std::string::npos) << f.missing;
  const ProgramRun fixed_dtype = [](const std::vector<at::Tensor>& a) { return std::vector<at::Tensor>{matmul(a)[0].to(at::kFloat)}; };
  EXPECT_NE(float64_reference(fixed_dtype, spec, args, matmul(args), [] {}).missing.find("fixes its dtype"), std::string::npos);
}

TEST(Float64Reference, NudgingMovesFloatingArgumentsByARoundingStepAtMost) {
  std::vector<at::Tensor> args = {at::rand({4096}) + 0.5, at::arange(10)};
  const std::vector<at::Tensor> before = {args[0].clone(), args[1].clone()};
  nudge_arguments(args);
  const at::Tensor rel = ((args[0] - before[0]) / before[0]).abs();
  EXPECT_LE(rel.max().item<double>(), 3 * 0x1p-24 * 2);
  const double moved = rel.gt(0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(moved, 0.5, 0.05);
  EXPECT_TRUE(at::equal(args[1], before[1]));
}

// The reference itself, another summation order and a TF32x3 split pass; TF32 numerics fail by the
// precision ratio even on all-positive inputs, where they stay inside the fixed 1e-4 tolerance.
TEST(PrecisionContract, Float32ProgramsPassAndTf32FailsEvenWhereTheToleranceHidesIt) {
  const TaskSpec spec = matmul_spec();
  const std::vector<at::Tensor> args = {at::rand({64, 1024}), at::rand({1024, 64})};
  const auto reference = held(matmul, spec, args);
  const at::Tensor& a = args[0];
  const at::Tensor& b = args[1];
  const auto same = judged(reference, at::matmul(a, b));
  EXPECT_TRUE(same.ok) << same.message;
  EXPECT_LE(same.precision_ratio, 1.0);
  at::Tensor split_k = at::zeros({64, 64});
  for (int64_t s = 0; s < 1024; s += 128) split_k += at::matmul(a.narrow(1, s, 128), b.narrow(0, s, 128));
  const auto reordered = judged(reference, split_k);
  EXPECT_TRUE(reordered.ok) << reordered.message;
  const at::Tensor ah = to_tf32(a), bh = to_tf32(b), al = to_tf32(a - ah), bl = to_tf32(b - bh);
  const auto tf32x3 = judged(reference, at::matmul(ah, bh) + (at::matmul(ah, bl) + at::matmul(al, bh)));
  EXPECT_TRUE(tf32x3.ok) << tf32x3.message;
  EXPECT_LT(tf32x3.precision_ratio, 4);
  const at::Tensor tf32 = at::matmul(ah, bh);
  // (the fixed tolerance alone: these all-positive sums hide TF32's rounding)
  EXPECT_TRUE(compare_outputs({{reference[0].values, "cpu"}}, {{tf32, "cpu"}}).ok);
  const auto low = judged(reference, tf32);
  EXPECT_FALSE(low.ok);
  EXPECT_GT(low.precision_ratio, kPrecisionFactor);
  EXPECT_NE(low.message.find("precision:"), std::string::npos) << low.message;
}

// Inputs of both signs with a few elements scaled by 2^4..2^10 both ways (what the value mix gives):
// a float32 product summed in another order, or one element after another (a dot product per
// thread, what a plain CUDA kernel does), is legitimate float32 and passes, though such an
// element's error can be hundreds of times the reference's own sensitivity sample there (the
// H100 failed 12425 of 16.8M elements of a split-K product when each element was held to its own
// sample); TF32 operands fail.
TEST(PrecisionContract, SequentialAndSplitSumsPassOnMixedMagnitudes) {
  const TaskSpec spec = matmul_spec();
  at::manual_seed(7);
  const auto mixed = [](at::Tensor x) {
    const at::Tensor moved = at::rand(x.sizes()) < 1.0 / 64;
    const at::Tensor exponent = at::randint(4, 11, x.sizes()).to(at::kFloat) * (at::rand(x.sizes()) < 0.5).to(at::kFloat).mul(2).sub(1);
    return at::where(moved, x * at::pow(2.0, exponent), x);
  };
  for (const bool positive : {false, true}) {
    at::Tensor a = mixed(at::randn({64, 1024})), b = mixed(at::randn({1024, 256}));
    if (positive) {
      a = a.abs();
      b = b.abs();
    }
    const auto reference = held(matmul, spec, {a, b});
    at::Tensor sequential = at::zeros({64, 256});
    for (int64_t k = 0; k < 1024; ++k) sequential += a.narrow(1, k, 1) * b.narrow(0, k, 1);
    const auto seq = judged(reference, sequential);
    EXPECT_TRUE(seq.ok) << (positive ? "all positive: " : "both signs: ") << seq.message;
    at::Tensor split_k = at::zeros({64, 256});
    for (int64_t s = 0; s < 1024; s += 256) split_k += at::matmul(a.narrow(1, s, 256), b.narrow(0, s, 256));
    const auto reordered = judged(reference, split_k);
    EXPECT_TRUE(reordered.ok) << reordered.message;
    EXPECT_LT(reordered.precision_ratio, 4);
    const auto low = judged(reference, at::matmul(to_tf32(a), to_tf32(b)));
    EXPECT_FALSE(low.ok);
    EXPECT_GT(low.precision_ratio, kPrecisionFactor);
  }
}

// An element is held to the largest error scale of its block of neighbours, not to its own sample:
// a lone scale of zero does not fail an error its neighbours' scales allow, and an error beyond
// kElementPrecisionFactor times the block's largest fails though the summed ratio stays small.
TEST(PrecisionContract, AnElementIsHeldToItsBlocksLargestErrorScale) {
  const int64_t n = 4 * kErrorScaleBlock;
  const at::Tensor r = at::ones({n});
  const at::Tensor delta = at::zeros({n}, at::kBFloat16);
  at::Tensor scale = at::full({n}, 1e-3, at::kBFloat16);
  scale[10] = 0;  // a sample that came out zero by chance
  const std::vector<ProgramOutput> reference = {{r, "cpu", delta, scale}};
  at::Tensor near = r.clone();
  near[10] += 0.1;  // beyond 1e-4 + 1e-4 and beyond its own scale, within 1024 x its block's 1e-3
  const auto lone = judged(reference, near);
  EXPECT_TRUE(lone.ok) << lone.message;
  at::Tensor far = r.clone();
  far[n - 1] += 2.0;  // beyond 1024 x 1e-3: wrong in one place, the summed ratio far below 32
  const auto wrong = judged(reference, far);
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.mismatched_elements, 1);
  EXPECT_EQ(wrong.worst_index, n - 1);
  EXPECT_LT(wrong.precision_ratio, kPrecisionFactor);
  EXPECT_NE(wrong.message.find("of the float64 reference, widened by 1024x float32's error there"), std::string::npos) << wrong.message;
}

// Inputs of both signs (what the value mix gives rand inputs): fp16 and bf16 fail by hundreds of times.
TEST(PrecisionContract, HalfAndBfloat16FailOnInputsOfBothSigns) {
  const TaskSpec spec = matmul_spec();
  const std::vector<at::Tensor> args = {at::rand({64, 1024}) * 2 - 1, at::rand({1024, 64}) * 2 - 1};
  const auto reference = held(matmul, spec, args);
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    const auto r = judged(reference, at::matmul(args[0].to(t).to(at::kFloat), args[1].to(t).to(at::kFloat)));
    EXPECT_FALSE(r.ok) << c10::toString(t);
    EXPECT_GT(r.precision_ratio, 100) << c10::toString(t);
  }
}

// An exact operation (the float32 reference errs nowhere): the bound is float32's rounding of each
// result, so fp16 fails even where the atol lets every element through.
TEST(PrecisionContract, AnExactOperationStillHasABound) {
  const TaskSpec spec = matmul_spec();
  const ProgramRun relu = [](const std::vector<at::Tensor>& a) { return std::vector<at::Tensor>{at::relu(a[0])}; };
  const std::vector<at::Tensor> args = {(at::rand({64, 1024}) - 0.5) * 1e-3, at::rand({1024, 64})};
  const auto reference = held(relu, spec, args);
  EXPECT_TRUE(judged(reference, at::relu(args[0])).ok);
  EXPECT_TRUE(judged(reference, at::relu(args[0].to(at::kDouble)).to(at::kFloat)).ok);
  const auto half = judged(reference, at::relu(args[0].to(at::kHalf)).to(at::kFloat));
  EXPECT_TRUE(compare_outputs({{reference[0].values, "cpu"}}, {{at::relu(args[0].to(at::kHalf)).to(at::kFloat), "cpu"}}).ok);
  EXPECT_FALSE(half.ok);
  EXPECT_NE(half.message.find("precision:"), std::string::npos) << half.message;
}

// NaN and infinity keep their rules: where the reference is not finite its error is 0 and the
// candidate must match it exactly.
TEST(PrecisionContract, NonFiniteValuesKeepTheirRules) {
  const at::Tensor r = at::tensor({1.0f, INFINITY, NAN, 2.0f});
  const at::Tensor zero = at::zeros({4}, at::kBFloat16);
  const at::Tensor scale = at::full({4}, 1e-7, at::kBFloat16);
  const std::vector<ProgramOutput> reference = {{r, "cpu", zero, scale}};
  EXPECT_TRUE(judged(reference, r.clone()).ok);
  EXPECT_FALSE(judged(reference, at::tensor({1.0f, 1e30f, NAN, 2.0f})).ok);
  EXPECT_FALSE(judged(reference, at::tensor({1.0f, INFINITY, 0.0f, 2.0f})).ok);
  EXPECT_FALSE(judged(reference, at::tensor({NAN, INFINITY, NAN, 2.0f})).ok);
}

}  // namespace
}  // namespace crl::worker
