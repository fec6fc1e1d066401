// The one tolerance of output comparison and its default rule by dtype (docs/program-format.md,
// `tolerance`): the task spec, the suite's checks and the evaluator all use these.
#pragma once

#include <c10/core/ScalarType.h>

namespace crl {

// |candidate - reference| <= atol + rtol * |reference|, element by element.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// float16 and bfloat16 1e-2, other floating (and complex) types 1e-4, integers and bool exact.
inline Tolerance default_tolerance(at::ScalarType dtype) {
  if (!at::isFloatingType(dtype) && !at::isComplexType(dtype)) return {0, 0};
  if (dtype == at::ScalarType::Half || dtype == at::ScalarType::BFloat16) return {1e-2, 1e-2};
  return {1e-4, 1e-4};
}

}  // namespace crl
