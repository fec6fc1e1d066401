// Tests of the value mix on the CPU (program/value_mix.h): what each init may take, that every call
// carries it (signs, magnitudes at a share drawn per call, constants drawn in about half the calls),
// that calls are deterministic per seed, and that `mixed: false` and an empty mix change nothing.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "program/arguments.h"
#include "program/run_settings.h"
#include "program/value_mix.h"

namespace crl {
namespace {

const at::Device kCpu(at::kCPU);

TaskSpec spec_from(const std::string& tensors, const std::string& scale = "{n: 128, m: 256}") {
  const std::string text = "task: level1/001_t\ncategory: test\n" + tensors + "scales:\n  small: " + scale + "\nflops: 1\nbytes: 1\n";
  return parse_task_spec({true, text, 1}, "t.crl");
}

const char* kTensors =
    "inputs:\n"
    "  - {name: x, shape: [n, m], dtype: float32, init: rand}\n"
    "  - {name: z, shape: [n, m], dtype: float32, init: randn}\n"
    "  - {name: idx, shape: [m], dtype: int64, init: 'randint(0, n)'}\n"
    "  - {name: p, shape: [n, m], dtype: float32, init: randn, post: [softmax(1)]}\n"
    "  - {name: k, shape: [n, m], dtype: float32, init: rand, mixed: false}\n"
    "params:\n"
    "  - {name: w, shape: [m], dtype: float32, init: ones}\n"
    "  - {name: b, shape: [m], dtype: float32, init: zeros}\n"
    "  - {name: s, shape: [m], dtype: float32, init: 'uniform(-2, 2)'}\n"
    "  - {name: f, shape: [m], dtype: float32, init: 'full(3)'}\n";

TEST(ValueMix, WhatEachInitMayTake) {
  const ValueMix mix = eligible_mix(spec_from(kTensors));
  const std::vector<uint32_t> want = {kMixSigns | kMixMagnitudes,  // rand: one sign only
                                      kMixMagnitudes,              // randn: symmetric already
                                      0,                           // integers
                                      0,                           // softmax rows: a structure the reference relies on
                                      0,                           // mixed: false
                                      kMixConstants,
                                      kMixConstants,
                                      kMixMagnitudes,  // uniform(-a, a): symmetric
                                      kMixConstants};
  EXPECT_EQ(mix.kinds, want);
  EXPECT_EQ(describe_mix(spec_from(kTensors), mix),
            "x: signs, magnitudes; z: magnitudes; w: constants drawn; b: constants drawn; s: magnitudes; f: constants drawn");
}

TEST(ValueMix, MixedIsABooleanInTheSpec) {
  try {
    spec_from("inputs:\n  - {name: x, shape: [n], dtype: float32, mixed: maybe}\n");
    FAIL() << "mixed: maybe was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected mixed to be true or false"), std::string::npos) << e.what();
  }
}

TEST(ValueMix, DeterministicPerSeedAndDifferentAcrossSeeds) {
  const TaskSpec spec = spec_from(kTensors);
  const ValueMix mix = eligible_mix(spec);
  const auto a = make_call_arguments(spec, "small", {7}, mix, kCpu);
  const auto b = make_call_arguments(spec, "small", {7}, mix, kCpu);
  const auto c = make_call_arguments(spec, "small", {8}, mix, kCpu);
  ASSERT_EQ(a.size(), spec.num_args());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::equal(a[i], b[i])) << spec.arg(i).name;
    EXPECT_EQ(a[i].sizes(), c[i].sizes());
    EXPECT_EQ(a[i].scalar_type(), c[i].scalar_type());
  }
  EXPECT_FALSE(at::equal(a[0], c[0]));
}

// Nothing mixed in where the mix is empty, or for a tensor that opted out, or for integers and
// structured tensors: those are make_arguments' tensors, bit for bit.
TEST(ValueMix, AnEmptyMixAndOptedOutTensorsAreThePlainArguments) {
  const TaskSpec spec = spec_from(kTensors);
  const auto plain = make_arguments(spec, "small", 11, kCpu);
  const auto unmixed = make_call_arguments(spec, "small", {11}, ValueMix{}, kCpu);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(at::equal(plain[i], unmixed[i])) << spec.arg(i).name;
  const auto mixed = make_call_arguments(spec, "small", {11}, eligible_mix(spec), kCpu);
  for (const size_t i : {2u, 3u, 4u}) EXPECT_TRUE(at::equal(plain[i], mixed[i])) << spec.arg(i).name;
}

// Every call carries the values (so a program cannot tell the calls that test them from the rest):
// signs on half of a rand tensor's elements, magnitudes of 16x to 1024x (and 1/16 to 1/1024) on a
// share that differs from call to call, never none.
TEST(ValueMix, EveryCallCarriesSignsAndMagnitudesAtAShareDrawnPerCall) {
  const TaskSpec spec = spec_from(kTensors);
  const ValueMix mix = eligible_mix(spec);
  double least = 1, most = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const auto plain = make_arguments(spec, "small", seed, kCpu);
    const auto args = make_call_arguments(spec, "small", {seed}, mix, kCpu);
    const double negative = args[0].lt(0).to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(negative, 0.5, 0.05) << "seed " << seed;
    // A magnitude moves |x| by 2^4 at least, either way; signs alone keep |x|.
    const at::Tensor ratio = args[0].abs() / plain[0].abs().clamp_min(1e-30);
    const double moved = (ratio.ge(15.9) | ratio.le(1 / 15.9)).to(at::kDouble).mean().item<double>();
    EXPECT_GT(moved, 0) << "seed " << seed;
    EXPECT_LE(moved, kMixShareMax * 1.5) << "seed " << seed;
    least = std::min(least, moved);
    most = std::max(most, moved);
    EXPECT_TRUE(args[0].abs().le(2048).all().item<bool>());
  }
  EXPECT_GT(most / least, 20) << "the share must vary from call to call: " << least << " .. " << most;
}

// Constant-initialised tensors are drawn at random in about half the calls, with the constant's sign
// (ones -> [0.5, 1.5), zeros -> [-0.5, 0.5), full(3) -> [1.5, 4.5)), and are the constant otherwise.
TEST(ValueMix, ConstantsAreDrawnInAboutHalfTheCalls) {
  const TaskSpec spec = spec_from(kTensors);
  const ValueMix mix = eligible_mix(spec);
  int drawn = 0;
  const int calls = 200;
  for (uint64_t seed = 1; seed <= calls; ++seed) {
    const auto args = make_call_arguments(spec, "small", {seed}, mix, kCpu);
    const at::Tensor& w = args[5];
    if (at::equal(w, at::ones_like(w))) continue;
    ++drawn;
    EXPECT_TRUE(w.ge(0.5).all().item<bool>() && w.lt(1.5).all().item<bool>());
    EXPECT_GT(w.std().item<double>(), 0.2);
  }
  EXPECT_GT(drawn, calls * 0.35);
  EXPECT_LT(drawn, calls * 0.65);
  // The judge's probe draws them always.
  ValueMix probing = mix;
  probing.probing = true;
  const auto probed = make_call_arguments(spec, "small", {1}, probing, kCpu);
  EXPECT_FALSE(at::equal(probed[5], at::ones_like(probed[5])));
  EXPECT_TRUE(probed[6].ge(-0.5).all().item<bool>() && probed[6].lt(0.5).all().item<bool>());
  EXPECT_TRUE(probed[8].ge(1.5).all().item<bool>() && probed[8].lt(4.5).all().item<bool>());
}

// An edge trial moves half the elements of a tensor with declared edges (or magnitudes); an ordinary
// call a share of them to the same edges.
TEST(ValueMix, EdgeTrialsAreDenseAndOrdinaryCallsSprinkleTheSameEdges) {
  const TaskSpec spec = spec_from("inputs:\n  - {name: x, shape: [n, m], dtype: float32, init: rand, edges: ['around(0.5)']}\n");
  const ValueMix mix = eligible_mix(spec);
  const auto at_bound = [](const at::Tensor& t) { return t.eq(0.5).to(at::kDouble).mean().item<double>(); };
  const auto dense = make_call_arguments(spec, "small", {3, true}, mix, kCpu);
  // half the elements, split between around(0.5) and the magnitudes; a quarter of around's exactly 0.5
  EXPECT_NEAR(at_bound(dense[0]), 0.5 / 2 / 4, 0.01);
  double seen = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) seen += at_bound(make_call_arguments(spec, "small", {seed}, mix, kCpu)[0]);
  EXPECT_GT(seen, 0) << "ordinary calls carry the declared edges too";
  EXPECT_LT(seen / 20, 0.5 / 2 / 4);
}

TEST(ValueMix, SpreadScalesSamplesAfterTheMix) {
  const TaskSpec spec = spec_from("inputs:\n  - {name: x, shape: [n, m], dtype: float32, init: randn}\n");
  const ValueMix mix = eligible_mix(spec);
  auto mixed = make_call_arguments(spec, "small", {5}, mix, kCpu);
  EXPECT_EQ(spread_samples(spec, mixed), 1u);
  const auto spread = make_call_arguments(spec, "small", {5, false, true}, mix, kCpu);
  EXPECT_TRUE(at::equal(mixed[0], spread[0]));
}

TEST(ValueMix, AMixOfTheWrongLengthIsRefused) {
  const TaskSpec spec = spec_from(kTensors);
  EXPECT_THROW(make_call_arguments(spec, "small", {1}, ValueMix{{kMixSigns}, false}, kCpu), InputError);
}

TEST(RunSettings, PrecisionIsFp32OrTf32) {
  EXPECT_EQ(parse_precision("fp32"), Precision::fp32);
  EXPECT_EQ(parse_precision("tf32"), Precision::tf32);
  EXPECT_EQ(precision_name(Precision::tf32), "tf32");
  EXPECT_THROW(parse_precision("fp16"), InputError);
}

}  // namespace
// The same call's arguments, made twice with several intra-op threads, are the same bytes: the
// judge makes a timed slot's inputs once to fill it and again to check them after the call. (The
// places moved to magnitudes are drawn with repeats; ATen's index_put_ wrote a repeated place from
// several threads, and a correct ReLU was "hack:input_mutation" in about one run of three.)
TEST(ValueMix, TheSameCallIsTheSameBytesWithManyThreads) {
  const TaskSpec spec = spec_from("inputs:\n  - {name: x, shape: [n, m], dtype: float32, init: randn}\n", "{n: 1024, m: 1024}");
  const ValueMix mix = eligible_mix(spec);
  ASSERT_NE(mix.kinds.at(0) & kMixMagnitudes, 0u);
  const int threads = at::get_num_threads();
  at::set_num_threads(std::max(2, threads));
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const auto a = make_call_arguments(spec, "small", {seed}, mix, kCpu);
    const auto b = make_call_arguments(spec, "small", {seed}, mix, kCpu);
    EXPECT_TRUE(at::equal(a[0], b[0])) << "seed " << seed;
    std::vector<at::Tensor> refilled = {at::empty_like(a[0])};
    fill_call_arguments(spec, "small", {seed}, mix, refilled);
    EXPECT_TRUE(at::equal(a[0], refilled[0])) << "seed " << seed << " refilled in place";
  }
  at::set_num_threads(threads);
}

// KernelBench's rule: params hold the Model's values whatever the mix drew for them (constants are
// drawn at random under crl's rule), in a call made anew and in one refilled in place; the inputs
// keep their mixed values.
TEST(ValueMix, FixedParamsOverrideTheMixedParamsAndLeaveTheInputs) {
  const TaskSpec spec = spec_from(kTensors);
  const ValueMix mix = eligible_mix(spec);
  const auto free_params = make_call_arguments(spec, "small", {9}, mix, kCpu);
  const at::Tensor w = at::full({256}, 0.5f);
  const at::Tensor s = at::linspace(-1, 1, 256);
  const FixedParams fixed = {{0, w}, {2, s}};  // params w and s, by their index among the params
  const size_t first_param = spec.inputs.size();
  const auto held = make_call_arguments(spec, "small", {9}, mix, kCpu, fixed);
  EXPECT_TRUE(at::equal(held[first_param], w));
  EXPECT_TRUE(at::equal(held[first_param + 2], s));
  EXPECT_TRUE(at::equal(held[first_param + 1], free_params[first_param + 1])) << "a param not fixed keeps its draw";
  for (size_t i = 0; i < first_param; ++i) EXPECT_TRUE(at::equal(held[i], free_params[i])) << "input " << i;
  std::vector<at::Tensor> refilled;
  for (const auto& t : held) refilled.push_back(at::empty_like(t));
  fill_call_arguments(spec, "small", {9}, mix, refilled, fixed);
  for (size_t i = 0; i < held.size(); ++i) EXPECT_TRUE(at::equal(held[i], refilled[i])) << "argument " << i << " refilled in place";
}

}  // namespace crl
