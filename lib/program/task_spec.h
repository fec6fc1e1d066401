// The spec section of a reference program: a task's inputs, parameters, scales, cost and tolerance.
#pragma once

#include <ATen/core/ATen_fwd.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "program/expression.h"
#include "program/init_args.h"
#include "program/kernelbench_params.h"
#include "program/program_text.h"
#include "program/tolerance.h"

namespace crl {

// How a tensor's values are drawn (docs/program-format.md, `init`). Arguments are expressions
// evaluated at the scale in use (so `uniform_fan_in(in)` follows the scale's `in`).
enum class InitKind { randn, rand, uniform, normal, randint, ones, zeros, full, uniform_fan_in };
struct InitSpec {
  InitKind kind = InitKind::randn;
  std::vector<Expr> args;
  std::string text;  // as written, e.g. "uniform(-1, 1)"
};

// A transformation applied after init, in order (docs/program-format.md, `post`).
enum class PostKind { abs, tril, triu, symmetric, softmax, add, mul, mul_rand };
struct PostOp {
  PostKind kind = PostKind::abs;
  std::vector<Expr> args;
  std::string text;
};

// Values an operation's branches care about, drawn in edge trials (docs/program-format.md, `edges`):
// around(v) puts values at and on both sides of a bound v (a clamp, a threshold, a shift before a
// ReLU), zeros exact zeros of both signs, large(m) magnitudes in [m, 2m) of both signs, signs
// the negated spec value (for inputs whose spec distribution has one sign only).
enum class EdgeKind { around, zeros, large, signs };
inline constexpr size_t kMaxEdgesPerTensor = 8;
struct EdgeSpec {
  EdgeKind kind = EdgeKind::around;
  std::vector<Expr> args;
  std::string text;  // as written, e.g. "around(-1)"
};

struct TensorSpec {
  std::string name;
  std::vector<Expr> shape;
  at::ScalarType dtype = at::ScalarType::Float;
  InitSpec init;
  std::vector<PostOp> post;
  std::vector<EdgeSpec> edges;  // empty: edge trials leave the tensor as its spec draws it
  // false: every call takes the values its init draws, nothing mixed in (program/value_mix.h): for a
  // tensor whose structure the task is about (the per-sample guard's fixture of near-equal rows).
  bool mixed = true;
  std::string where;  // "file:line" of its entry
};

struct TaskSpec {
  std::string origin;  // the program file
  std::string id;      // level<N>/<NNN>_<name>
  std::string name, category, description, notes;
  std::vector<TensorSpec> inputs, params;
  std::map<std::string, ScaleVariables> scales;  // scale name -> its variables
  Expr flops, bytes;
  // `floor`: what every correct program must do per call, at least (the roofline gate's floor
  // beside the outputs it must write); absent: nothing beyond the outputs.
  std::optional<Expr> floor_bytes, floor_flops;
  std::optional<Tolerance> tolerance;
  // `init_args`: the constructor arguments of the task's KernelBench module, in its order; absent when
  // the spec does not record them (every suite task does; `[]`: a constructor without arguments).
  std::optional<std::vector<InitArg>> init_args;
  // `kernelbench_params`: the module's parameters and buffers in its declaration order, each with the crl
  // param that holds its value; absent when the spec does not record them (every suite task does).
  std::optional<KernelBenchParams> kernelbench_params;
  // `kernelbench_inputs`: forward's arguments in the order KernelBench's module takes them, each an
  // input (its index) or a value KernelBench passes where crl has no tensor (level1/005's Python
  // float); absent: the inputs in their order.
  struct KernelBenchInput {
    std::optional<size_t> input;
    InitArg value;  // when not an input
  };
  std::optional<std::vector<KernelBenchInput>> kernelbench_inputs;

  // Throws InputError naming the task when `scale` is not one of its scales.
  const ScaleVariables& scale_variables(const std::string& scale) const;
  std::vector<int64_t> shape_at(const TensorSpec& tensor, const std::string& scale) const;
  double flops_at(const std::string& scale) const;
  double bytes_at(const std::string& scale) const;
  double floor_bytes_at(const std::string& scale) const;  // 0 when the spec declares none
  double floor_flops_at(const std::string& scale) const;
  // The spec's tolerance for floating outputs (default_tolerance when it has none);
  // integer and bool outputs always get {0, 0}: they must match exactly.
  Tolerance tolerance_for(at::ScalarType output_dtype) const;
  // The constructor arguments at `scale`; throws InputError naming the task when it records none.
  std::vector<InitValue> init_args_at(const std::string& scale) const;
  // A KernelBench tensor's shape at `scale` (one of kernelbench_params' entries).
  std::vector<int64_t> kernelbench_shape_at(const KernelBenchTensor& tensor, const std::string& scale) const;
  // forward's arity: inputs, then params.
  size_t num_args() const { return inputs.size() + params.size(); }
  // The i-th argument of forward (inputs first, then params).
  const TensorSpec& arg(size_t index) const;
  std::vector<std::string> scale_names() const;
  // Whether any input or param declares `edges` (the task has edge trials).
  bool has_edges() const;
  // Bytes of one tensor, and of all of forward's arguments, at `scale`. Throws InputError naming
  // the task and the tensor when a tensor's size does not fit in 64 bits.
  int64_t tensor_bytes_at(const TensorSpec& tensor, const std::string& scale) const;
  int64_t argument_bytes_at(const std::string& scale) const;
  // Throws InputError naming the task, the scale and its largest tensor when the arguments at
  // `scale` need more than `limit_bytes` (a caller passes the device's memory, say).
  void check_argument_bytes(const std::string& scale, int64_t limit_bytes) const;
};

// The most bytes a spec's arguments may take at any of its scales (checked when the spec is read):
// 128 GiB, below one H200's 141 GB, so that every scale of an accepted spec can be allocated on the
// largest GPU crl runs on. A caller with a smaller device checks its own limit with
// TaskSpec::check_argument_bytes before it allocates.
inline constexpr int64_t kMaxArgumentBytes = int64_t{128} << 30;

// Parses and validates the spec section: unknown or missing keys, bad ids, names, dtypes, init
// and post ops, and expressions (each is evaluated at every scale, so undefined variables or
// negative dimensions are caught here). Errors are InputError "file:LINE: ..." where LINE is the
// file's own line (section first_line + the YAML line).
TaskSpec parse_task_spec(const SourceSection& spec, const std::string& origin);

// "float32", "bfloat16", ... (the format's spelling); throws InputError for other dtypes.
std::string dtype_name(at::ScalarType dtype);
// Inverse of dtype_name; nullopt for a name the format does not know.
std::optional<at::ScalarType> dtype_from_name(const std::string& name);

}  // namespace crl
