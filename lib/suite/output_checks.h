// Checks on a reference's outputs: bitwise determinism and the degenerate-output rule.
//
// An output is degenerate when a trivial program would pass the task's correctness check: when
// (nearly) all its elements are within tolerance of one constant, of an input of the same shape, or
// of the same output computed from another seed. "Nearly all" is a fraction (default 99%), so an
// output that is exactly 0 except in a few places (a running product that underflows) is caught too.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "program/task_spec.h"

namespace crl {

// Same dtype, shape and bytes (NaNs with the same bits are equal, +0 and -0 are not).
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

// The fraction of elements of `a` with |a - b| <= atol + rtol * |b| (`b` broadcast to `a`; NaN is
// close only to NaN). Integer and bool tensors count exact equality. Works in chunks on a's device,
// so a multi-gigabyte output needs only a little extra memory.
double fraction_close(const at::Tensor& a, const at::Tensor& b, const Tolerance& tolerance);

struct OutputFinding {
  std::string kind;    // "constant", "equals_input", "seed_independent", "non_finite"
  size_t output = 0;   // which output
  double fraction = 0; // the fraction of elements that matched the trivial candidate
  std::string detail;  // for people: what was found, with numbers
};

struct DegenerateRule {
  double fraction = 0.99;  // at least this fraction of elements within tolerance makes a finding
};

// Findings for outputs computed from one seed (`outputs`, from arguments `args` named `arg_names`)
// and from another seed (`other_seed_outputs`), with the task's tolerance per output dtype.
std::vector<OutputFinding> degenerate_findings(const TaskSpec& spec, const std::vector<at::Tensor>& args,
                                               const std::vector<at::Tensor>& outputs,
                                               const std::vector<at::Tensor>& other_seed_outputs,
                                               const DegenerateRule& rule = {});

}  // namespace crl
