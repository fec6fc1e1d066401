// Arithmetic expressions of a task spec (shapes, flops, bytes, init and post arguments) over
// named integer scale variables: numbers, + - * / // % parentheses and unary minus.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace crl {

using ScaleVariables = std::map<std::string, int64_t>;

// An expression's value with its kind kept: an exact integer while every step stays whole, else a
// double (a constructor argument is a Python int or float by it, docs/program-format.md `init_args`).
struct Number {
  bool integral = true;
  int64_t integer = 0;
  double decimal = 0;
  double as_double() const { return integral ? static_cast<double>(integer) : decimal; }
};

// A parsed expression; cheap to copy (the tree is shared and immutable).
// Integer operands stay exact 64-bit integers (overflow is an error) while every operation's
// result is whole; '/' of integers that do not divide evenly, or any decimal operand, gives a
// double. '//' floors and '%' takes the divisor's sign, as in Python.
class Expr {
 public:
  Expr() = default;
  // Throws InputError "where: expression 'text': <what>" on a syntax error.
  static Expr parse(const std::string& text, const std::string& where);

  // Throws InputError naming `where`, the expression and the unknown variable, or division by zero.
  double evaluate(const ScaleVariables& variables) const;
  // As evaluate, but the result must be a whole number (throws InputError otherwise).
  int64_t evaluate_integer(const ScaleVariables& variables) const;
  // As evaluate, keeping whether the value is an exact integer.
  Number evaluate_number(const ScaleVariables& variables) const;

  const std::string& text() const { return text_; }
  const std::string& where() const { return where_; }  // "file:line" of the expression
  bool empty() const { return root_ == nullptr; }
  // The variable names the expression uses, sorted, each once.
  std::vector<std::string> variables() const;

  struct Node;

 private:
  std::string text_;
  std::string where_;
  std::shared_ptr<const Node> root_;
};

}  // namespace crl
