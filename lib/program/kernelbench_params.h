// A task's KernelBench tensors (the spec's `kernelbench_params`): its module's parameters and buffers as it
// declares them, each with its shape in scale variables and the crl param that holds its value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "program/expression.h"

namespace crl {

// How a param's value becomes the KernelBench tensor's (docs/program-format.md, `kernelbench_params`): as it
// is, reshaped to the tensor's shape (the same elements in the same order), or with two dimensions swapped.
enum class KernelBenchTransform { identity, reshape, transpose };

struct KernelBenchTensor {
  std::string name;  // qualified, as named_parameters() or named_buffers() gives it: "conv.weight", "0.bias"
  std::vector<Expr> shape;
  std::optional<size_t> param;  // index in the spec's params; none: `unmatched` says why no param holds it
  KernelBenchTransform transform = KernelBenchTransform::identity;
  int64_t dim0 = 0, dim1 = 0;   // the dimensions a transpose swaps
  std::string transform_text;   // as written ("reshape", "transpose(0, 1)"); empty for identity
  std::string unmatched;
  std::string where;  // "file:line" of its entry
};

struct KernelBenchParams {
  std::vector<KernelBenchTensor> parameters;  // in named_parameters() order
  std::vector<KernelBenchTensor> buffers;     // in named_buffers() order
  std::map<std::string, std::string> crl_only;  // crl param -> why no KernelBench tensor holds it
  std::string where;  // "file:line" of the key
};

// Bounds on what a spec may write: KernelBench's largest module (DenseNet201) declares 619 tensors.
inline constexpr size_t kMaxKernelBenchTensors = 4096;

// A qualified module path: identifiers or indices joined by '.' ("features.0.weight").
bool is_kernelbench_name(const std::string& name);

// `transform` as written ("reshape", "transpose(a, b)"), into `tensor`; throws InputError naming `where`.
void parse_kernelbench_transform(const std::string& text, const std::string& where, KernelBenchTensor& tensor);

// Every crl param held by exactly one tensor or listed under crl_only, and crl_only naming only params no
// tensor holds. Throws InputError naming the file's line and the param.
void check_kernelbench_coverage(const KernelBenchParams& kernelbench, const std::vector<std::string>& param_names);

// The tensors at one scale: shapes whole and >= 0, and each held tensor's shape agreeing with its param's
// `param_shapes` under its transform (identity: equal; reshape: the same element count; transpose: equal
// with the two dimensions swapped). Throws InputError naming the entry's line, the tensor, the param, the
// scale and both shapes.
void check_kernelbench_shapes(const KernelBenchParams& kernelbench, const std::vector<std::string>& param_names,
                              const std::vector<std::vector<int64_t>>& param_shapes, const ScaleVariables& variables,
                              const std::string& scale);

}  // namespace crl
