// Tests of spec expressions: precedence, exact integers, Python-style // and %, and error messages.
#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"
#include "program/expression.h"

namespace crl {
namespace {

double eval(const std::string& text, const ScaleVariables& vars = {}) {
  return Expr::parse(text, "f:1").evaluate(vars);
}

std::string error_of(const std::string& text, const ScaleVariables& vars = {}) {
  try {
    Expr::parse(text, "f.crl:7").evaluate_integer(vars);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Expression, PrecedenceParenthesesAndUnaryMinus) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("-2 * -3"), 6);
  EXPECT_EQ(eval("- (4 - 10)"), 6);
  EXPECT_EQ(eval("2 * 3 - 4 / 2"), 4);
  EXPECT_EQ(eval("10 - 3 - 2"), 5);  // left associative
  EXPECT_EQ(eval("0.5 * 4"), 2.0);
  EXPECT_EQ(eval("1e-4"), 1e-4);
  EXPECT_EQ(eval("7 / 2"), 3.5);
}

TEST(Expression, FloorDivisionAndModuloFollowPython) {
  EXPECT_EQ(eval("7 // 2"), 3);
  EXPECT_EQ(eval("-7 // 2"), -4);
  EXPECT_EQ(eval("7 % 3"), 1);
  EXPECT_EQ(eval("-7 % 3"), 2);
  EXPECT_EQ(eval("7 % -3"), -2);
  EXPECT_EQ(eval("7.5 // 2"), 3.0);
}

TEST(Expression, VariablesAndExactIntegers) {
  const ScaleVariables vars{{"batch", 4096}, {"dim", 393216}};
  const Expr e = Expr::parse("2 * 4 * batch * dim", "f:1");
  EXPECT_EQ(e.evaluate_integer(vars), 2LL * 4 * 4096 * 393216);
  EXPECT_EQ(e.variables(), (std::vector<std::string>{"batch", "dim"}));
  // Beyond 2^53 integers stay exact.
  EXPECT_EQ(Expr::parse("n * n + 1", "f").evaluate_integer({{"n", 3037000499}}), 3037000499LL * 3037000499LL + 1);
  EXPECT_EQ(Expr::parse("dim / 4", "f").evaluate_integer(vars), 98304);
}

TEST(Expression, ErrorsNameTheExpressionAndTheProblem) {
  EXPECT_EQ(error_of("batch * din", {{"batch", 1}, {"dim", 2}}),
            "f.crl:7: expression 'batch * din': unknown variable 'din' (the scale defines: batch, dim)");
  EXPECT_EQ(error_of("3 / 2"), "f.crl:7: expression '3 / 2': expected a whole number (found 1.5)");
  EXPECT_EQ(error_of("1 // 0"), "f.crl:7: expression '1 // 0': division by zero");
  EXPECT_EQ(error_of("2 ** 3"), "f.crl:7: expression '2 ** 3': '**' (power) is not supported; write the product");
  EXPECT_EQ(error_of("(1 + 2"), "f.crl:7: expression '(1 + 2': expected ')' (found the end or another token)");
  EXPECT_EQ(error_of("1 +"), "f.crl:7: expression '1 +': expected a number, a variable or '(' (found the end)");
  EXPECT_EQ(error_of("a b"), "f.crl:7: expression 'a b': expected an operator or the end (found 'b')");
  EXPECT_EQ(error_of(""), "f.crl:7: expression '': expected an expression (found nothing)");
  EXPECT_EQ(error_of("n * n", {{"n", 4000000000}}), "f.crl:7: expression 'n * n': integer overflow");
  EXPECT_EQ(error_of("99999999999999999999"),
            "f.crl:7: expression '99999999999999999999': integer '99999999999999999999' does not fit in 64 bits");
}


// INT64_MIN / -1 traps (SIGFPE) on x86 rather than wrapping: each integer operator refuses it.
TEST(Expression, Int64MinDividedByMinusOneIsAnOverflowNotATrap) {
  const ScaleVariables vars = {{"m", std::numeric_limits<int64_t>::min()}};
  EXPECT_EQ(error_of("m // -1", vars), "f.crl:7: expression 'm // -1': integer overflow");
  EXPECT_EQ(error_of("m / -1", vars), "f.crl:7: expression 'm / -1': integer overflow");
  EXPECT_EQ(error_of("(-9223372036854775807 - 1) // -1"),
            "f.crl:7: expression '(-9223372036854775807 - 1) // -1': integer overflow");
  EXPECT_EQ(Expr::parse("m % -1", "f:1").evaluate_integer(vars), 0);
  EXPECT_EQ(Expr::parse("m // 1", "f:1").evaluate_integer(vars), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Expr::parse("7 % -1", "f:1").evaluate_integer({}), 0);
}

// Deep nesting would overflow the recursive parser's stack (100k parentheses crashed it).
TEST(Expression, NestingAndLengthAreCapped) {
  const std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  EXPECT_NE(error_of(deep).find("more than 64 nested parentheses and signs (crl's limit)"), std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '-') + "1").find("nested parentheses and signs"), std::string::npos);
  std::string chain = "1";
  for (int i = 0; i < 200000; ++i) chain += "+1";
  EXPECT_NE(error_of(chain).find("more than 1000 operators (crl's limit)"), std::string::npos);
  // Within the caps, the same shapes still parse.
  EXPECT_EQ(eval(std::string(63, '(') + "2" + std::string(63, ')')), 2);  // 64 levels with the outermost
  std::string short_chain = "1";
  for (int i = 0; i < 999; ++i) short_chain += "+1";
  EXPECT_EQ(eval(short_chain), 1000);
}

}  // namespace
}  // namespace crl
