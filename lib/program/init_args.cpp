// Parser, evaluator and Python spelling of a spec's constructor arguments (`init_args`).
#include "program/init_args.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "core/error.h"

namespace crl {
namespace {

std::string trimmed(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

// Where the bracket opened at text[0] closes, or npos; `commas` gets the top-level commas inside.
size_t matching_close(const std::string& text, std::vector<size_t>& commas) {
  int depth = 0;
  commas.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') {
      if (--depth == 0) return i;
    }
    if (c == ',' && depth == 1) commas.push_back(i);
  }
  return std::string::npos;
}

[[noreturn]] void fail(const std::string& where, const std::string& text, const std::string& what) {
  throw InputError(fmt::format("{}: entry '{}': {}", where, text, what));
}

InitArg parse(const std::string& raw, const std::string& where, size_t& count, size_t depth) {
  InitArg arg;
  arg.text = trimmed(raw);
  const std::string& text = arg.text;
  if (++count > kMaxInitArgs) fail(where, text, fmt::format("more than {} arguments and items (crl's limit)", kMaxInitArgs));
  if (text == "true" || text == "false") {
    arg.kind = InitArgKind::boolean;
    arg.boolean = text == "true";
    return arg;
  }
  if (text == "True" || text == "False" || text == "None") {
    fail(where, text, "write true or false (YAML's spelling); None is not a spec value");
  }
  std::vector<size_t> commas;
  const size_t close = text.empty() || (text[0] != '(' && text[0] != '[') ? std::string::npos : matching_close(text, commas);
  const bool bracketed = close == text.size() - 1;
  // A list is any [...]; parentheses make a tuple only with a comma inside, or empty: (a + b) is a number.
  const bool list = bracketed && text[0] == '[' && text.back() == ']';
  const bool tuple = bracketed && text[0] == '(' && text.back() == ')' && (!commas.empty() || trimmed(text.substr(1, close - 1)).empty());
  if (!list && !tuple) {
    if (!text.empty() && text[0] == '[') fail(where, text, "expected a list [a, b, ...] closed by its ']' at the end");
    arg.kind = InitArgKind::number;
    arg.number = Expr::parse(text, where);
    return arg;
  }
  if (depth >= kMaxInitArgNesting) fail(where, text, fmt::format("more than {} nested tuples and lists (crl's limit)", kMaxInitArgNesting));
  arg.kind = list ? InitArgKind::list : InitArgKind::tuple;
  const std::string inner = text.substr(1, close - 1);
  if (trimmed(inner).empty()) return arg;  // () or []
  std::vector<std::string> items;
  size_t start = 1;
  for (const size_t comma : commas) {
    items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  items.push_back(text.substr(start, close - start));
  if (items.size() > 1 && trimmed(items.back()).empty()) items.pop_back();  // Python's trailing comma: (8,)
  for (const std::string& item : items) {
    if (trimmed(item).empty()) fail(where, text, "an empty item (two commas, or a comma first)");
    arg.items.push_back(parse(item, where, count, depth + 1));
  }
  return arg;
}

std::string python_float(double v) {
  // fmt's shortest round-trip digits, as Python's repr; a whole float keeps its ".0".
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

InitArg parse_init_arg(const std::string& text, const std::string& where, size_t& count) {
  return parse(text, where, count, 0);
}

InitValue evaluate_init_arg(const InitArg& arg, const ScaleVariables& variables) {
  InitValue value;
  value.kind = arg.kind;
  switch (arg.kind) {
    case InitArgKind::number:
      value.number = arg.number.evaluate_number(variables);
      if (!value.number.integral && !std::isfinite(value.number.decimal)) {
        throw InputError(fmt::format("{}: entry '{}' must be finite (found {})", arg.number.where(), arg.text,
                                     value.number.decimal));
      }
      break;
    case InitArgKind::boolean:
      value.boolean = arg.boolean;
      break;
    case InitArgKind::tuple:
    case InitArgKind::list:
      for (const InitArg& item : arg.items) value.items.push_back(evaluate_init_arg(item, variables));
      break;
  }
  return value;
}

std::string python_literal(const InitValue& value) {
  switch (value.kind) {
    case InitArgKind::number:
      return value.number.integral ? std::to_string(value.number.integer) : python_float(value.number.decimal);
    case InitArgKind::boolean:
      return value.boolean ? "True" : "False";
    case InitArgKind::tuple: {
      if (value.items.size() == 1) return "(" + python_literal(value.items[0]) + ",)";
      std::string s = python_literal(value.items);
      return "(" + s.substr(1, s.size() - 2) + ")";
    }
    case InitArgKind::list:
      return python_literal(value.items);
  }
  return "";
}

std::string python_literal(const std::vector<InitValue>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + python_literal(values[i]);
  return s + "]";
}

}  // namespace crl
