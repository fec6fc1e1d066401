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

// The precision contract (docs/evaluation.md): a float32 output, compared with the reference's
// float64 outputs, may err, summed over the output, by this many times the error float32 arithmetic
// makes there (the float32 reference's own error and its response to rounding its inputs, plus
// float32's rounding of each result, so an exact operation still has a bound). Float32 programs of
// another order (split-K, a TF32x3 split, an online softmax) come out at 0.1-3x, a naive sequential
// sum of 4K-16K elements at 2-11x; TF32 or fp16 operands of a matrix product at 40x on all-positive
// inputs and 280-690x on inputs of both signs, bf16 and fp16 elementwise at hundreds to thousands
// (tools/analysis/precision_ratios.py).
inline constexpr double kPrecisionFactor = 32;
// Element by element, beyond the tolerance, an output may err by this many times the largest error
// scale of its block of neighbours (worker/compare_rule.h: kErrorScaleBlock). One element's scale is a single
// random sample (the nudged run's move, the reference's own error) and sometimes near zero by chance;
// the block's largest is not. A sequential float32 sum (a dot product per thread: legitimate float32)
// errs by up to ~300x that near large terms where the reference's blocked sums err less; TF32
// operands by 3000x and more. The summed ratio above is what holds precision; this bound catches
// what is wrong in a few places (a formula that fails outside the spec's range, a mishandled edge).
inline constexpr double kElementPrecisionFactor = 1024;

// float16 and bfloat16 1e-2, other floating (and complex) types 1e-4, integers and bool exact.
inline Tolerance default_tolerance(at::ScalarType dtype) {
  if (!at::isFloatingType(dtype) && !at::isComplexType(dtype)) return {0, 0};
  if (dtype == at::ScalarType::Half || dtype == at::ScalarType::BFloat16) return {1e-2, 1e-2};
  return {1e-4, 1e-4};
}

}  // namespace crl
