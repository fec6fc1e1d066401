// Validation of a spec's KernelBench tensors (`kernelbench_params`): names, transforms, coverage, shapes.
#include "program/kernelbench_params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>
#include <set>

#include "core/error.h"

namespace crl {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) {
    // Each dimension fits the spec's 128 GiB bound (checked before this); the product of a bad entry might not.
    if (__builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string described(const KernelBenchTensor& t, bool buffer, const std::vector<std::string>& param_names) {
  std::string s = fmt::format("{}: kernelbench_params: {} '{}'", t.where, buffer ? "buffer" : "parameter", t.name);
  if (t.param) s += fmt::format(" (param '{}'{})", param_names[*t.param], t.transform_text.empty() ? "" : ", " + t.transform_text);
  return s;
}

void check_tensor(const KernelBenchTensor& t, bool buffer, const std::vector<std::string>& param_names,
                  const std::vector<std::vector<int64_t>>& param_shapes, const ScaleVariables& variables,
                  const std::string& scale) {
  std::vector<int64_t> shape;
  for (const Expr& dim : t.shape) {
    int64_t n = 0;
    try {
      n = dim.evaluate_integer(variables);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{} (scale '{}')", e.what(), scale));  // e names the file, line, key and tensor
    }
    if (n < 0) {
      throw InputError(fmt::format("{}: dimension '{}' is negative ({}) at scale '{}'", described(t, buffer, param_names),
                                   dim.text(), n, scale));
    }
    shape.push_back(n);
  }
  if (!t.param) return;
  const std::vector<int64_t>& held = param_shapes[*t.param];
  const std::string what = described(t, buffer, param_names);
  switch (t.transform) {
    case KernelBenchTransform::identity:
      if (shape != held) {
        throw InputError(fmt::format("{}: shape {} at scale '{}' is not the param's {}; write the param's shape, or a "
                                     "transform (reshape, transpose(a, b))", what, shape_text(shape), scale, shape_text(held)));
      }
      break;
    case KernelBenchTransform::reshape:
      if (element_count(shape) != element_count(held)) {
        throw InputError(fmt::format("{}: shape {} at scale '{}' has {} elements, the param's {} has {}", what,
                                     shape_text(shape), scale, element_count(shape), shape_text(held), element_count(held)));
      }
      break;
    case KernelBenchTransform::transpose: {
      const auto rank = static_cast<int64_t>(held.size());
      if (t.dim0 >= rank || t.dim1 >= rank) {
        throw InputError(fmt::format("{}: the param has {} dimensions at scale '{}'; {} names one it does not have", what,
                                     rank, scale, t.transform_text));
      }
      std::vector<int64_t> swapped = held;
      std::swap(swapped[t.dim0], swapped[t.dim1]);
      if (shape != swapped) {
        throw InputError(fmt::format("{}: shape {} at scale '{}' is not the param's {} with dimensions {} and {} swapped ({})",
                                     what, shape_text(shape), scale, shape_text(held), t.dim0, t.dim1, shape_text(swapped)));
      }
      break;
    }
  }
}

}  // namespace

bool is_kernelbench_name(const std::string& name) {
  static const std::regex re("([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(\\.([A-Za-z_][A-Za-z0-9_]*|[0-9]+))*");
  return std::regex_match(name, re);
}

void parse_kernelbench_transform(const std::string& text, const std::string& where, KernelBenchTensor& tensor) {
  static const std::regex transpose("transpose\\(\\s*([0-9]{1,2})\\s*,\\s*([0-9]{1,2})\\s*\\)");
  std::smatch m;
  tensor.transform_text = text;
  if (text == "reshape") {
    tensor.transform = KernelBenchTransform::reshape;
  } else if (std::regex_match(text, m, transpose)) {
    tensor.transform = KernelBenchTransform::transpose;
    tensor.dim0 = std::stoll(m[1].str());
    tensor.dim1 = std::stoll(m[2].str());
    if (tensor.dim0 == tensor.dim1) {
      throw InputError(fmt::format("{}: transform '{}' swaps a dimension with itself; leave the transform out", where, text));
    }
  } else {
    throw InputError(fmt::format("{}: expected transform reshape or transpose(a, b) with dimensions a and b of the "
                                 "param (leave it out when the param is the tensor as it is) (found '{}')", where, text));
  }
}

void check_kernelbench_coverage(const KernelBenchParams& kernelbench, const std::vector<std::string>& param_names) {
  std::vector<const KernelBenchTensor*> holder(param_names.size(), nullptr);
  for (const auto* list : {&kernelbench.parameters, &kernelbench.buffers}) {
    for (const KernelBenchTensor& t : *list) {
      if (!t.param) continue;
      const KernelBenchTensor*& first = holder[*t.param];
      if (first) {
        throw InputError(fmt::format("{}: kernelbench_params: param '{}' is held by two tensors, '{}' ({}) and '{}'; "
                                     "each param is one tensor's", t.where, param_names[*t.param], first->name, first->where,
                                     t.name));
      }
      first = &t;
    }
  }
  for (const auto& [name, why] : kernelbench.crl_only) {
    size_t i = 0;
    while (i < param_names.size() && param_names[i] != name) ++i;
    if (i == param_names.size()) {
      throw InputError(fmt::format("{}: kernelbench_params: crl_only names '{}', which is not one of the spec's params",
                                   kernelbench.where, name));
    }
    if (holder[i]) {
      throw InputError(fmt::format("{}: kernelbench_params: param '{}' is under crl_only, yet tensor '{}' ({}) holds it",
                                   kernelbench.where, name, holder[i]->name, holder[i]->where));
    }
  }
  for (size_t i = 0; i < param_names.size(); ++i) {
    if (!holder[i] && kernelbench.crl_only.count(param_names[i]) == 0) {
      throw InputError(fmt::format("{}: kernelbench_params: no KernelBench tensor holds param '{}'; name it as one's "
                                   "param, or say why under crl_only", kernelbench.where, param_names[i]));
    }
  }
}

void check_kernelbench_shapes(const KernelBenchParams& kernelbench, const std::vector<std::string>& param_names,
                              const std::vector<std::vector<int64_t>>& param_shapes, const ScaleVariables& variables,
                              const std::string& scale) {
  for (const KernelBenchTensor& t : kernelbench.parameters) check_tensor(t, false, param_names, param_shapes, variables, scale);
  for (const KernelBenchTensor& t : kernelbench.buffers) check_tensor(t, true, param_names, param_shapes, variables, scale);
}

}  // namespace crl
