// Recursive-descent parser and exact-integer evaluator for spec expressions.
#include "program/expression.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace crl {

struct Expr::Node {
  enum class Kind { number, variable, negate, add, subtract, multiply, divide, floor_divide, modulo };
  Kind kind = Kind::number;
  bool integral = false;     // number literal written without '.' or exponent
  int64_t integer = 0;       // the literal's value when integral
  double decimal = 0;        // the literal's value otherwise
  std::string name;          // variable name
  std::shared_ptr<const Node> left, right;
};

namespace {

using Node = Expr::Node;
using NodePtr = std::shared_ptr<const Node>;

class Parser {
 public:
  Parser(const std::string& text, const std::string& where) : text_(text), where_(where) {}

  NodePtr parse_all() {
    skip_space();
    if (pos_ == text_.size()) fail("expected an expression (found nothing)");
    NodePtr node = parse_sum();
    skip_space();
    if (pos_ != text_.size()) fail(fmt::format("expected an operator or the end (found '{}')", text_.substr(pos_)));
    return node;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: expression '{}': {}", where_, text_, what));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  NodePtr binary(Node::Kind kind, NodePtr left, NodePtr right) {
    enter(operators_, kMaxOperators, "operators");
    auto node = std::make_shared<Node>();
    node->kind = kind;
    node->left = std::move(left);
    node->right = std::move(right);
    return node;
  }

  NodePtr parse_sum() {
    NodePtr left = parse_product();
    for (;;) {
      skip_space();
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
        const Node::Kind kind = text_[pos_] == '+' ? Node::Kind::add : Node::Kind::subtract;
        ++pos_;
        left = binary(kind, left, parse_product());
      } else {
        return left;
      }
    }
  }

  NodePtr parse_product() {
    NodePtr left = parse_unary();
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) return left;
      Node::Kind kind;
      if (text_.compare(pos_, 2, "//") == 0) {
        kind = Node::Kind::floor_divide;
        pos_ += 2;
      } else if (text_[pos_] == '*') {
        if (text_.compare(pos_, 2, "**") == 0) fail("'**' (power) is not supported; write the product");
        kind = Node::Kind::multiply;
        ++pos_;
      } else if (text_[pos_] == '/') {
        kind = Node::Kind::divide;
        ++pos_;
      } else if (text_[pos_] == '%') {
        kind = Node::Kind::modulo;
        ++pos_;
      } else {
        return left;
      }
      left = binary(kind, left, parse_unary());
    }
  }

  // Counts the recursion of parse_unary (unary signs and parentheses) and the operators of the
  // whole expression, each of which adds a level to the tree that evaluation walks recursively.
  void enter(size_t& counter, size_t limit, const char* what) {
    if (++counter > limit) fail(fmt::format("more than {} {} (crl's limit)", limit, what));
  }

  NodePtr parse_unary() {
    enter(depth_, kMaxNesting, "nested parentheses and signs");
    struct Leave {
      size_t& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    skip_space();
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
      const bool negate = text_[pos_] == '-';
      ++pos_;
      NodePtr operand = parse_unary();
      if (!negate) return operand;
      auto node = std::make_shared<Node>();
      node->kind = Node::Kind::negate;
      node->left = std::move(operand);
      return node;
    }
    return parse_primary();
  }

  NodePtr parse_primary() {
    skip_space();
    if (pos_ >= text_.size()) fail("expected a number, a variable or '(' (found the end)");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      NodePtr inner = parse_sum();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("expected ')' (found the end or another token)");
      ++pos_;
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return parse_number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      auto node = std::make_shared<Node>();
      node->kind = Node::Kind::variable;
      node->name = text_.substr(start, pos_ - start);
      return node;
    }
    fail(fmt::format("expected a number, a variable or '(' (found '{}')", text_.substr(pos_)));
  }

  NodePtr parse_number() {
    const size_t start = pos_;
    bool decimal = false;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      decimal = true;
      ++pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p < text_.size() && std::isdigit(static_cast<unsigned char>(text_[p]))) {
        decimal = true;
        pos_ = p;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      }
    }
    const std::string literal = text_.substr(start, pos_ - start);
    if (literal == ".") fail("expected a number (found '.')");
    auto node = std::make_shared<Node>();
    node->kind = Node::Kind::number;
    if (!decimal) {
      const auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), node->integer);
      if (ec != std::errc() || end != literal.data() + literal.size()) {
        fail(fmt::format("integer '{}' does not fit in 64 bits", literal));
      }
      node->integral = true;
    } else {
      node->decimal = std::strtod(literal.c_str(), nullptr);
    }
    return node;
  }

  // Spec expressions are a few operators deep; these caps keep a hostile one from overflowing
  // the stack of the parser, the evaluator or the tree's destructor.
  static constexpr size_t kMaxNesting = 64;
  static constexpr size_t kMaxOperators = 1000;

  const std::string& text_;
  const std::string& where_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  size_t operators_ = 0;
};

// A value during evaluation: an exact integer while every step stays whole, else a double.
using Value = Number;

Value make_integer(int64_t v) { return Value{true, v, 0}; }
Value make_decimal(double v) { return Value{false, 0, v}; }

class Evaluator {
 public:
  Evaluator(const std::string& text, const std::string& where, const ScaleVariables& variables)
      : text_(text), where_(where), variables_(variables) {}

  Value eval(const Node& node) const {
    switch (node.kind) {
      case Node::Kind::number:
        return node.integral ? make_integer(node.integer) : make_decimal(node.decimal);
      case Node::Kind::variable: {
        const auto it = variables_.find(node.name);
        if (it == variables_.end()) {
          std::string known;
          for (const auto& [name, value] : variables_) known += (known.empty() ? "" : ", ") + name;
          fail(fmt::format("unknown variable '{}' (the scale defines: {})", node.name,
                           known.empty() ? "nothing" : known));
        }
        return make_integer(it->second);
      }
      case Node::Kind::negate: {
        const Value v = eval(*node.left);
        if (v.integral) {
          if (v.integer == std::numeric_limits<int64_t>::min()) fail("integer overflow");
          return make_integer(-v.integer);
        }
        return make_decimal(-v.decimal);
      }
      default:
        return binary(node.kind, eval(*node.left), eval(*node.right));
    }
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(fmt::format("{}: expression '{}': {}", where_, text_, what));
  }

 private:
  Value binary(Node::Kind kind, const Value& a, const Value& b) const {
    if (a.integral && b.integral) {
      const int64_t x = a.integer, y = b.integer;
      int64_t r = 0;
      switch (kind) {
        case Node::Kind::add:
          if (__builtin_add_overflow(x, y, &r)) fail("integer overflow");
          return make_integer(r);
        case Node::Kind::subtract:
          if (__builtin_sub_overflow(x, y, &r)) fail("integer overflow");
          return make_integer(r);
        case Node::Kind::multiply:
          if (__builtin_mul_overflow(x, y, &r)) fail("integer overflow");
          return make_integer(r);
        case Node::Kind::divide:
          if (y == 0) fail("division by zero");
          // INT64_MIN / -1 overflows (and traps on x86), as does INT64_MIN % -1 below.
          if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
          if (x % y == 0) return make_integer(x / y);
          return make_decimal(static_cast<double>(x) / static_cast<double>(y));
        case Node::Kind::floor_divide: {
          if (y == 0) fail("division by zero");
          if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
          int64_t q = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
          return make_integer(q);
        }
        case Node::Kind::modulo: {
          if (y == 0) fail("division by zero");
          if (y == -1) return make_integer(0);  // x % -1 is 0, but INT64_MIN % -1 traps
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return make_integer(m);
        }
        default:
          break;
      }
    }
    const double x = a.as_double(), y = b.as_double();
    switch (kind) {
      case Node::Kind::add: return make_decimal(x + y);
      case Node::Kind::subtract: return make_decimal(x - y);
      case Node::Kind::multiply: return make_decimal(x * y);
      case Node::Kind::divide:
        if (y == 0) fail("division by zero");
        return make_decimal(x / y);
      case Node::Kind::floor_divide:
        if (y == 0) fail("division by zero");
        return make_decimal(std::floor(x / y));
      case Node::Kind::modulo: {
        if (y == 0) fail("division by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return make_decimal(m);
      }
      default:
        fail("internal error: unknown operator");
    }
  }

  const std::string& text_;
  const std::string& where_;
  const ScaleVariables& variables_;
};

void collect_variables(const Node* node, std::set<std::string>& out) {
  if (node == nullptr) return;
  if (node->kind == Node::Kind::variable) out.insert(node->name);
  collect_variables(node->left.get(), out);
  collect_variables(node->right.get(), out);
}

}  // namespace

Expr Expr::parse(const std::string& text, const std::string& where) {
  Expr expr;
  expr.text_ = text;
  expr.where_ = where;
  expr.root_ = Parser(expr.text_, expr.where_).parse_all();
  return expr;
}

double Expr::evaluate(const ScaleVariables& variables) const {
  if (root_ == nullptr) throw InputError(fmt::format("{}: empty expression evaluated", where_));
  return Evaluator(text_, where_, variables).eval(*root_).as_double();
}

int64_t Expr::evaluate_integer(const ScaleVariables& variables) const {
  if (root_ == nullptr) throw InputError(fmt::format("{}: empty expression evaluated", where_));
  const Evaluator evaluator(text_, where_, variables);
  const Value v = evaluator.eval(*root_);
  if (v.integral) return v.integer;
  const double d = v.decimal;
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<int64_t>(d);
  evaluator.fail(fmt::format("expected a whole number (found {})", d));
}

Number Expr::evaluate_number(const ScaleVariables& variables) const {
  if (root_ == nullptr) throw InputError(fmt::format("{}: empty expression evaluated", where_));
  return Evaluator(text_, where_, variables).eval(*root_);
}

std::vector<std::string> Expr::variables() const {
  std::set<std::string> names;
  collect_variables(root_.get(), names);
  return {names.begin(), names.end()};
}

}  // namespace crl
