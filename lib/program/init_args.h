// A task's constructor arguments (the spec's `init_args`): what KernelBench's module for the task takes,
// in its order, written in the task's scale variables so that they follow the scale in use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "program/expression.h"

namespace crl {

// One argument as written (docs/program-format.md, `init_args`): a number (an expression of scale
// variables; a Python int where it is an exact integer, else a float), true or false, or a tuple
// `(a, b)` or a list `[a, b]` of arguments.
enum class InitArgKind { number, boolean, tuple, list };
struct InitArg {
  InitArgKind kind = InitArgKind::number;
  Expr number;
  bool boolean = false;
  std::vector<InitArg> items;  // tuple, list
  std::string text;            // as written
};

// An argument's value at one scale: what the constructor receives.
struct InitValue {
  InitArgKind kind = InitArgKind::number;
  Number number;
  bool boolean = false;
  std::vector<InitValue> items;
};

// Bounds on what a spec may write (sizes read from outside are bounded): KernelBench's largest
// constructor takes 11 arguments and nests a list one level deep.
inline constexpr size_t kMaxInitArgs = 256;      // arguments and their items, all counted
inline constexpr size_t kMaxInitArgNesting = 8;  // tuples and lists inside each other

// Parses one entry; `where` ("file:line: init_args") goes into errors (InputError), as do the
// entry's text and what was expected. `count` accumulates the items parsed, for kMaxInitArgs.
InitArg parse_init_arg(const std::string& text, const std::string& where, size_t& count);

// The value at `variables`: throws InputError naming the entry when an expression does not evaluate
// (an unknown variable, a division by zero) or is not finite.
InitValue evaluate_init_arg(const InitArg& arg, const ScaleVariables& variables);

// Python's spelling of a value: 64, 2.0, 1e-05, True, (64, 1, 1), (8,), [16384, 16384].
std::string python_literal(const InitValue& value);
// A list of them as Python writes the list: [64, 128, 3, (128, 1, 1)].
std::string python_literal(const std::vector<InitValue>& values);

}  // namespace crl
