// Tests of parse_task_spec: a full spec, helpers, and validation errors with the .crl file's lines.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "program/task_spec.h"

namespace crl {
namespace {

const char* kGoodProgram =
    "// a linear layer\n"                                                           // 1
    "// crl:spec\n"                                                                 // 2
    "task: level1/042_linear\n"                                                     // 3
    "name: Linear layer\n"                                                          // 4
    "category: matmul\n"                                                            // 5
    "description: y = x W^T + b\n"                                                  // 6
    "notes: inputs are small so the op is not trivial\n"                            // 7
    "inputs:\n"                                                                     // 8
    "  - {name: x, shape: [batch, in], dtype: bfloat16, init: randn}\n"             // 9
    "params:\n"                                                                     // 10
    "  - {name: weight, shape: [out, in], dtype: float32, init: uniform_fan_in(in)}\n"  // 11
    "  - {name: bias, shape: [out], dtype: float32, init: 'uniform(-1, 1)', post: [abs, 'mul(0.5)']}\n"  // 12
    "scales:\n"                                                                     // 13
    "  full:  {batch: 4096, in: 8192, out: 8192}\n"                                 // 14
    "  small: {batch: 16, in: 64, out: 32}\n"                                       // 15
    "flops: 2 * batch * in * out\n"                                                 // 16
    "bytes: 2 * batch * in + 4 * (out * in + out) + 4 * batch * out\n"              // 17
    "// crl:host\n"
    "at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);\n";

// The InputError message of parsing `spec_text` as a spec section starting on file line `first_line`.
std::string spec_error(const std::string& spec_text, int first_line = 3) {
  SourceSection section{true, spec_text, first_line};
  try {
    parse_task_spec(section, "t.crl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kBase =
    "task: level1/001_relu\n"                                   // +0
    "category: activation\n"                                    // +1
    "inputs:\n"                                                 // +2
    "  - {name: x, shape: [n], dtype: float32, init: randn}\n"  // +3
    "scales:\n"                                                 // +4
    "  small: {n: 8}\n"                                         // +5
    "flops: n\n"                                                // +6
    "bytes: 8 * n\n";                                           // +7

TEST(TaskSpec, ParsesAFullSpec) {
  const ProgramText program = parse_program_text(kGoodProgram, "lin.crl");
  const TaskSpec spec = parse_task_spec(program.spec, program.origin);
  EXPECT_EQ(spec.id, "level1/042_linear");
  EXPECT_EQ(spec.name, "Linear layer");
  EXPECT_EQ(spec.category, "matmul");
  EXPECT_EQ(spec.description, "y = x W^T + b");
  EXPECT_EQ(spec.notes, "inputs are small so the op is not trivial");
  ASSERT_EQ(spec.inputs.size(), 1u);
  ASSERT_EQ(spec.params.size(), 2u);
  EXPECT_EQ(spec.num_args(), 3u);
  EXPECT_EQ(spec.arg(2).name, "bias");
  EXPECT_EQ(spec.inputs[0].dtype, at::kBFloat16);
  EXPECT_EQ(spec.inputs[0].where, "lin.crl:9");
  EXPECT_EQ(spec.params[0].init.kind, InitKind::uniform_fan_in);
  EXPECT_EQ(spec.params[1].init.kind, InitKind::uniform);
  ASSERT_EQ(spec.params[1].post.size(), 2u);
  EXPECT_EQ(spec.params[1].post[1].kind, PostKind::mul);
  EXPECT_EQ(spec.shape_at(spec.params[0], "small"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(spec.shape_at(spec.inputs[0], "full"), (std::vector<int64_t>{4096, 8192}));
  EXPECT_DOUBLE_EQ(spec.flops_at("full"), 2.0 * 4096 * 8192 * 8192);
  EXPECT_DOUBLE_EQ(spec.bytes_at("small"), 2.0 * 16 * 64 + 4 * (32 * 64 + 32) + 4 * 16 * 32);
  EXPECT_EQ(spec.scale_names(), (std::vector<std::string>{"full", "small"}));
  EXPECT_THROW(spec.shape_at(spec.inputs[0], "medium"), InputError);
}

TEST(TaskSpec, ToleranceDefaultsAndOverride) {
  SourceSection section{true, kBase, 3};
  TaskSpec spec = parse_task_spec(section, "t.crl");
  EXPECT_FALSE(spec.tolerance.has_value());
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kFloat).atol, 1e-4);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kHalf).rtol, 1e-2);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kBFloat16).atol, 1e-2);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kLong).atol, 0);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kBool).rtol, 0);
  section.text += "tolerance: {atol: 1e-3, rtol: 2e-3}\n";
  spec = parse_task_spec(section, "t.crl");
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kFloat).atol, 1e-3);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kHalf).rtol, 2e-3);
  EXPECT_DOUBLE_EQ(spec.tolerance_for(at::kInt).atol, 0);
}

TEST(TaskSpec, AFloorIsOptionalAndAtMostTheTasksEstimate) {
  SourceSection section{true, kBase, 3};
  TaskSpec spec = parse_task_spec(section, "t.crl");
  EXPECT_FALSE(spec.floor_bytes.has_value());
  EXPECT_DOUBLE_EQ(spec.floor_bytes_at("small"), 0);  // none declared: the gate's floor is the outputs alone
  EXPECT_DOUBLE_EQ(spec.floor_flops_at("small"), 0);
  section.text += "floor: {bytes: 4 * n, flops: n}\n";
  spec = parse_task_spec(section, "t.crl");
  EXPECT_DOUBLE_EQ(spec.floor_bytes_at("small"), 32);
  EXPECT_DOUBLE_EQ(spec.floor_flops_at("small"), 8);
  // Only bytes: flops stay 0.
  section.text = kBase + "floor: {bytes: 4 * n}\n";
  EXPECT_DOUBLE_EQ(parse_task_spec(section, "t.crl").floor_flops_at("small"), 0);
  // Above the estimate (bytes: 8 * n): every program of the estimate would be impossible.
  EXPECT_NE(spec_error(kBase + "floor: {bytes: 16 * n}\n").find("at most '8 * n'"), std::string::npos)
      << spec_error(kBase + "floor: {bytes: 16 * n}\n");
  EXPECT_NE(spec_error(kBase + "floor: {bytes: 4 * n, latency: 1}\n").find("unknown key 'latency'"), std::string::npos);
  EXPECT_NE(spec_error(kBase + "floor: {bytes: 4 * m}\n"), "(no error)");  // an undefined variable
}

TEST(TaskSpec, BlockStyleEntriesAndTheirLines) {
  const std::string text =
      "task: level1/007_matmul\n"          // file line 10
      "category: matmul\n"                 // 11
      "inputs:\n"                          // 12
      "  - name: a\n"                      // 13
      "    shape: [m, k]\n"                // 14
      "    dtype: float16\n"               // 15
      "  - name: b\n"                      // 16
      "    shape: [k, 2 * n // 2]\n"       // 17
      "    dtype: float16\n"               // 18
      "    init: 'normal(0, 1 / 8)'\n"     // 19
      "scales:\n"
      "  small: {m: 4, k: 8, n: 3}\n"
      "flops: 2 * m * n * k\n"
      "bytes: 2 * (m * k + k * n + m * n)\n";
  const TaskSpec spec = parse_task_spec({true, text, 10}, "mm.crl");
  EXPECT_EQ(spec.inputs[1].where, "mm.crl:16");
  EXPECT_EQ(spec.shape_at(spec.inputs[1], "small"), (std::vector<int64_t>{8, 3}));
  std::string bad = text;
  bad.replace(bad.find("'normal(0, 1 / 8)'"), 18, "'normal(0, -1)'");
  EXPECT_EQ(spec_error(bad, 10), "t.crl:16 (scale 'small'): tensor 'b': init 'normal(0, -1)' needs std >= 0");
}

TEST(TaskSpec, RepeatedKeysAreErrors) {
  EXPECT_EQ(spec_error(kBase + "flops: 2 * n\n"), "t.crl:11: key 'flops' appears twice in the spec");
  std::string s = kBase;
  s.replace(s.find("{n: 8}"), 6, "{n: 8, n: 9}");
  EXPECT_EQ(spec_error(s), "t.crl:8: key 'n' appears twice in scale 'small'");
}

TEST(TaskSpec, InitDefaultsToRandnForFloats) {
  const TaskSpec spec = parse_task_spec({true,
      "task: level1/001_relu\ncategory: a\ninputs: [{name: x, shape: [n], dtype: float16}]\n"
      "scales: {s: {n: 2}}\nflops: 0\nbytes: 0\n", 1}, "t.crl");
  EXPECT_EQ(spec.inputs[0].init.kind, InitKind::randn);
}

TEST(TaskSpec, ErrorsNameTheFileLine) {
  // The section starts on file line 3, so YAML line k (0-based) is file line 3 + k.
  EXPECT_EQ(spec_error(kBase + "bogus: 1\n"), "t.crl:11: unknown key 'bogus' in the spec (known keys: bytes, category, "
                                              "description, floor, flops, init_args, inputs, kernelbench_inputs, kernelbench_params, name, "
                                              "notes, params, scales, task, tolerance)");
  std::string s = kBase;
  s.replace(s.find("init: randn"), 11, "init: gauss");
  EXPECT_EQ(spec_error(s), "t.crl:6: expected init randn, rand, uniform(lo, hi), normal(mean, std), randint(lo, hi), "
                           "ones, zeros, full(v) or uniform_fan_in(expr) (found 'gauss')");
  s = kBase;
  s.replace(s.find("float32"), 7, "float64");
  EXPECT_EQ(spec_error(s), "t.crl:6: tensor 'x': expected dtype float32, float16, bfloat16, int64, int32 or bool "
                           "(found 'float64')");
  s = kBase;
  s.replace(s.find("shape: [n]"), 10, "shape: [m]");
  EXPECT_EQ(spec_error(s), "t.crl:6: expression 'm': unknown variable 'm' (the scale defines: n)");
  s = kBase;
  s.replace(s.find("bytes: 8 * n"), 12, "bytes: 8 * (n");
  EXPECT_EQ(spec_error(s), "t.crl:10: expression '8 * (n': expected ')' (found the end or another token)");
  s = kBase;
  s.replace(s.find("task: level1/001_relu"), 21, "task: relu");
  EXPECT_EQ(spec_error(s), "t.crl:3: expected task id level<N>/<NNN>_<name> (lower case, digits, '_') (found 'relu')");
  s = kBase;
  s.replace(s.find("shape: [n]"), 10, "shape: [n - 9]");
  EXPECT_EQ(spec_error(s), "t.crl:6 (scale 'small'): tensor 'x': dimension 'n - 9' is negative (-1)");
  s = kBase;
  s.replace(s.find("dtype: float32, init: randn"), 27, "dtype: int32, init: randn");
  EXPECT_EQ(spec_error(s), "t.crl:6: tensor 'x': init 'randn' needs a floating dtype (found int32); use randint, "
                           "ones, zeros or full");
  s = kBase;
  s.replace(s.find("init: randn}"), 12, "init: randn, post: [tril]}");
  EXPECT_EQ(spec_error(s), "t.crl:6 (scale 'small'): tensor 'x': post op 'tril' needs at least 2 dimensions");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: x, shape: [n], dtype: float32}\n"),
            "t.crl:12: tensor name 'x' is used twice (inputs and params share one namespace)");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: w, shape: [n], dtype: int64}\n"),
            "t.crl:12: tensor 'w': missing field 'init' (required for int64 tensors)");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: w, shape: [n], dtype: float32, size: 3}\n"),
            "t.crl:12: unknown key 'size' in an entry of 'params' (known keys: dtype, edges, init, mixed, name, post, shape)");
  EXPECT_EQ(spec_error(kBase + "tolerance: {atol: -1, rtol: 0}\n"), "t.crl:11: tolerance 'atol' must be >= 0");
  EXPECT_EQ(spec_error(kBase + "tolerance: [1\n"), "t.crl:12: YAML syntax error in the spec: end of sequence flow not found");
  s = kBase;
  s.replace(s.find("flops: n\n"), 9, "");
  EXPECT_EQ(spec_error(s), "t.crl:3: missing field 'flops'");
  EXPECT_EQ(spec_error("- a\n- b\n"),
            "t.crl:3: expected the spec to be a YAML mapping (task, inputs, scales, ...)");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: m, shape: [n, 2], dtype: float32, post: [symmetric]}\n"),
            "t.crl:12 (scale 'small'): tensor 'm': post op 'symmetric' needs square last two dimensions (found 8 x 2)");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: m, shape: [n], dtype: float32, post: ['softmax(1)']}\n"),
            "t.crl:12 (scale 'small'): tensor 'm': softmax dim 1 is out of range for 1 dimensions");
  EXPECT_EQ(spec_error(kBase + "params:\n  - {name: m, shape: [n], dtype: float32, init: 'uniform(1)'}\n"),
            "t.crl:12: init 'uniform' takes 2 argument(s) (found 1)");
}

}  // namespace
}  // namespace crl

namespace crl {
namespace {

// Found by fuzz_task_spec: a YAML key that is itself a list made yaml-cpp's conversion throw its
// own exception type, which escaped as an internal error instead of bad input.
TEST(TaskSpec, KeysThatAreNotPlainScalarsAreBadInput) {
  const std::string message = spec_error("? [a, b]\n: 1\ntask: level1/001_x\n");
  EXPECT_NE(message.find("t.crl:3: expected a plain key in the spec"), std::string::npos) << message;
}

}  // namespace
}  // namespace crl

namespace crl {
namespace {

const std::string kTwoTensors =
    "task: level1/001_big\n"
    "category: test\n"
    "inputs:\n"
    "  - {name: x, shape: [n, m], dtype: float32}\n"
    "  - {name: y, shape: [n], dtype: float16}\n"
    "scales:\n";
const std::string kCosts = "flops: 1\nbytes: 1\n";

TEST(TaskSpec, ArgumentBytesMultiplyOutShapesAndDtypes) {
  SourceSection section{true, kTwoTensors + "  small: {n: 1000, m: 3}\n" + kCosts, 3};
  const TaskSpec spec = parse_task_spec(section, "t.crl");
  EXPECT_EQ(spec.tensor_bytes_at(spec.inputs[0], "small"), 4 * 1000 * 3);
  EXPECT_EQ(spec.tensor_bytes_at(spec.inputs[1], "small"), 2 * 1000);
  EXPECT_EQ(spec.argument_bytes_at("small"), 4 * 1000 * 3 + 2 * 1000);
  EXPECT_NO_THROW(spec.check_argument_bytes("small", 14000));
  try {
    spec.check_argument_bytes("small", 13999);
    ADD_FAILURE() << "a limit below the arguments' bytes was accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("task 'level1/001_big'"), std::string::npos) << m;
    EXPECT_NE(m.find("scale 'small'"), std::string::npos) << m;
    EXPECT_NE(m.find("the largest is tensor 'x'"), std::string::npos) << m;
  }
}

TEST(TaskSpec, SpecsWhoseArgumentsExceedTheFormatsLimitAreRefused) {
  // 2^18 x 2^17 float32 = 128 GiB, plus y: over kMaxArgumentBytes at scale full only.
  const std::string over = spec_error(kTwoTensors + "  full: {n: 262144, m: 131072}\n  small: {n: 4, m: 4}\n" + kCosts);
  EXPECT_NE(over.find("t.crl:6: task 'level1/001_big': the arguments at scale 'full' take 128.00 GiB, over the limit "
                      "of 128.00 GiB; the largest is tensor 'x'"),
            std::string::npos)
      << over;
  EXPECT_EQ(spec_error(kTwoTensors + "  full: {n: 262144, m: 131071}\n" + kCosts), "(no error)");
  // A shape whose element count overflows 64 bits names the tensor too, instead of wrapping around.
  const std::string overflow = spec_error(kTwoTensors + "  full: {n: 4294967296, m: 4294967296}\n" + kCosts);
  EXPECT_NE(overflow.find("task 'level1/001_big': tensor 'x' at scale 'full'"), std::string::npos) << overflow;
  EXPECT_NE(overflow.find("overflow 64 bits"), std::string::npos) << overflow;
}

}  // namespace
}  // namespace crl
