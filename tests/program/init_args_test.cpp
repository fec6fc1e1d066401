// Tests of the spec's `init_args`: the grammar (numbers, booleans, tuples, lists), Python's spelling of
// the values at a scale, and errors that name the file, line and key.
#include <gtest/gtest.h>

#include "core/error.h"
#include "program/init_args.h"
#include "program/task_spec.h"

namespace crl {
namespace {

const std::string kBase =
    "task: level2/063_gemm_relu_divide\n"                               // line 3
    "category: gemm\n"                                                  // 4
    "inputs:\n"                                                         // 5
    "  - {name: x, shape: [batch, in_features], dtype: float32}\n"      // 6
    "scales:\n"                                                         // 7
    "  full: {batch: 1024, in_features: 8192, out_features: 8192}\n"   // 8
    "  small: {batch: 2, in_features: 64, out_features: 32}\n"          // 9
    "flops: batch\n"                                                    // 10
    "bytes: batch\n";                                                   // 11

TaskSpec parse(const std::string& text) { return parse_task_spec(SourceSection{true, text, 3}, "t.crl"); }

std::string spec_error(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string at(const std::string& init_args, const std::string& scale) {
  return python_literal(parse(kBase + "init_args: " + init_args + "\n").init_args_at(scale));
}

TEST(InitArgs, ValuesFollowTheScaleAndKeepPythonsTypes) {
  const std::string args = "[in_features, out_features, 2.0, true, '(out_features, 1, 1)', '(out_features,)', "
                           "'[in_features // 2, (1, 2)]', 1e-05, -1, out_features / 3, '()', '[]', '(in_features)']";
  EXPECT_EQ(at(args, "full"),
            "[8192, 8192, 2.0, True, (8192, 1, 1), (8192,), [4096, (1, 2)], 1e-05, -1, 2730.6666666666665, (), [], 8192]");
  EXPECT_EQ(at(args, "small"), "[64, 32, 2.0, True, (32, 1, 1), (32,), [32, (1, 2)], 1e-05, -1, 10.666666666666666, (), [], 64]");
  // An exact division stays an int; a literal with a point or an exponent is a float.
  EXPECT_EQ(at("[out_features / 2, 4.0 / 2, 3e2, false]", "full"), "[4096, 2.0, 300.0, False]");
  // Block style and a trailing comma inside a list are Python's too.
  EXPECT_EQ(at("\n  - in_features\n  - '[1, 2,]'", "small"), "[64, [1, 2]]");
}

TEST(InitArgs, AbsentIsNotEmpty) {
  EXPECT_FALSE(parse(kBase).init_args.has_value());
  const TaskSpec none = parse(kBase + "init_args: []\n");
  ASSERT_TRUE(none.init_args.has_value());
  EXPECT_TRUE(none.init_args->empty());
  EXPECT_EQ(python_literal(none.init_args_at("full")), "[]");
  try {
    parse(kBase).init_args_at("full");
    FAIL() << "init_args_at of a spec without init_args";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "t.crl: task 'level2/063_gemm_relu_divide' records no init_args (its module's constructor arguments)");
  }
}

TEST(InitArgs, ErrorsNameTheFileLineAndKey) {
  EXPECT_EQ(spec_error(kBase + "init_args: [in_features, hidden]\n"),
            "t.crl:12: init_args: expression 'hidden': unknown variable 'hidden' (the scale defines: batch, in_features, "
            "out_features) (scale 'full')");
  EXPECT_EQ(spec_error(kBase + "init_args: [in_features, '(1, 2 +)']\n"),
            "t.crl:12: init_args: expression '2 +': expected a number, a variable or '(' (found the end)");
  EXPECT_EQ(spec_error(kBase + "init_args: [in_features, [1, 2]]\n"),
            "t.crl:12: init_args: expected a single value; quote a tuple or a list: '(a, b)', '[a, b]' (found '[1, 2]')");
  EXPECT_EQ(spec_error(kBase + "init_args: in_features\n"),
            "t.crl:12: expected 'init_args' to be a list, [] for none (found 'in_features')");
  EXPECT_EQ(spec_error(kBase + "init_args: [True]\n"),
            "t.crl:12: init_args: entry 'True': write true or false (YAML's spelling); None is not a spec value");
  EXPECT_EQ(spec_error(kBase + "init_args: ['(1,, 2)']\n"),
            "t.crl:12: init_args: entry '(1,, 2)': an empty item (two commas, or a comma first)");
  EXPECT_EQ(spec_error(kBase + "init_args: ['[1, 2'] \n"),
            "t.crl:12: init_args: entry '[1, 2': expected a list [a, b, ...] closed by its ']' at the end");
  // Evaluated at every scale: a division by zero at the small scale only.
  EXPECT_EQ(spec_error(kBase + "init_args: ['(1, 2 // (out_features - 32))']\n"),
            "t.crl:12: init_args: expression '2 // (out_features - 32)': division by zero (scale 'small')");
  EXPECT_EQ(spec_error(kBase + "init_args: [1]\ninit_args: [2]\n"), "t.crl:13: key 'init_args' appears twice in the spec");
}

TEST(InitArgs, SizesAreBounded) {
  std::string deep = "1";
  for (size_t i = 0; i < kMaxInitArgNesting + 1; ++i) deep = "[" + deep + "]";
  EXPECT_NE(spec_error(kBase + "init_args: ['" + deep + "']\n").find("more than 8 nested tuples and lists"), std::string::npos);
  std::string many = "[";
  for (size_t i = 0; i < kMaxInitArgs; ++i) many += "1, ";
  EXPECT_NE(spec_error(kBase + "init_args: ['" + many + "]']\n").find("more than 256 arguments and items"), std::string::npos);
}

}  // namespace
}  // namespace crl

namespace crl {
namespace {

// `kernelbench_inputs`: forward's arguments in KernelBench's order, inputs by name and values.
TEST(KernelBenchInputs, InputsByNameAndValuesAtTheScale) {
  const TaskSpec spec = parse(kBase + "kernelbench_inputs: [x, 3.14, in_features // 2]\n");
  ASSERT_TRUE(spec.kernelbench_inputs.has_value());
  ASSERT_EQ(spec.kernelbench_inputs->size(), 3u);
  EXPECT_EQ((*spec.kernelbench_inputs)[0].input, std::optional<size_t>(0));
  EXPECT_FALSE((*spec.kernelbench_inputs)[1].input.has_value());
  EXPECT_EQ(python_literal(evaluate_init_arg((*spec.kernelbench_inputs)[1].value, spec.scale_variables("full"))), "3.14");
  EXPECT_EQ(python_literal(evaluate_init_arg((*spec.kernelbench_inputs)[2].value, spec.scale_variables("small"))), "32");
  EXPECT_FALSE(parse(kBase).kernelbench_inputs.has_value());
}

TEST(KernelBenchInputs, EveryInputOnceAndValuesThatEvaluate) {
  EXPECT_EQ(spec_error(kBase + "kernelbench_inputs: [x, x]\n"), "t.crl:12: kernelbench_inputs: input 'x' is named twice");
  EXPECT_EQ(spec_error(kBase + "kernelbench_inputs: [3.14]\n"),
            "t.crl:12: kernelbench_inputs: input 'x' is missing (name every input once)");
  EXPECT_EQ(spec_error(kBase + "kernelbench_inputs: x\n"), "t.crl:12: expected 'kernelbench_inputs' to be a list (found 'x')");
  EXPECT_NE(spec_error(kBase + "kernelbench_inputs: [x, nope]\n").find("nope"), std::string::npos);
}

}  // namespace
}  // namespace crl
