// The rule of an output comparison for one element, and how two partial results join: shared by
// the CPU pass (output_comparison.cpp) and the GPU kernel (compare_values_cuda.cu), so that the
// judge decides alike wherever the outputs are. Each element in float64: |c - r| <= atol + rtol * |r|,
// rounded step by step (no fused multiply-add on either side); NaN only where both are NaN;
// infinities must be equal; integers and bool exact (the caller skips equal ones). The worst element
// is the one of largest excess, the first of equal ones.
// With a float64 reference (the precision contract, docs/evaluation.md), r is the float32
// reference's output, d its error against the float64 one (float64 = r + d, d = 0 where either is
// not finite) and s >= |d| the error float32 may make there (float64_reference.h): the element is
// held to |c - (r + d)| <= atol + rtol * |r + d| + factor * b, b the largest s of its block of
// kErrorScaleBlock elements (program/tolerance.h), and its error and s (plus float32's rounding of
// the result) are summed for the output's precision ratio.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CRL_HOST_DEVICE __host__ __device__
#else
#define CRL_HOST_DEVICE
#endif

namespace crl::worker {

// The elements (consecutive in flat order) whose largest error scale bounds each one's error: a
// single element's scale is one random sample, sometimes near zero by chance (program/tolerance.h).
constexpr int kErrorScaleBlock = 256;

// float32's unit roundoff: an exactly rounded result is within this of the truth, relatively.
constexpr double kFloat32Roundoff = 0x1p-24;

struct CompareStats {
  int64_t bad = 0;           // elements outside the tolerance or breaking a NaN/Inf rule
  // With a float64 reference, over the elements where both references are finite: the candidate's
  // error against it, and the error float32 may make (s) plus float32's rounding of the result.
  double sum_error = 0, sum_scale = 0;
  double max_abs_error = 0;  // over the elements whose error is finite
  double worst_excess = -1;  // error / allowed error of the worst element (infinity: a rule broken); -1: none seen
  int64_t worst_index = -1;
  double worst_reference = 0, worst_candidate = 0;
};

namespace compare_rule {

CRL_HOST_DEVICE inline bool is_nan(double x) {
#if defined(__CUDA_ARCH__)
  return isnan(x);
#else
  return std::isnan(x);
#endif
}
CRL_HOST_DEVICE inline bool is_inf(double x) {
#if defined(__CUDA_ARCH__)
  return isinf(x);
#else
  return std::isinf(x);
#endif
}

// The NaN and infinity rules: true when they decide the element (its excess set: 0 or infinity).
CRL_HOST_DEVICE inline bool non_finite_rule(double rv, double cv, double* excess) {
  const bool r_nan = is_nan(rv), c_nan = is_nan(cv);
  if (r_nan || c_nan) {
    *excess = r_nan && c_nan ? 0.0 : INFINITY;
    return true;
  }
  if (is_inf(rv) || is_inf(cv)) {
    *excess = rv == cv ? 0.0 : INFINITY;
    return true;
  }
  return false;
}

CRL_HOST_DEVICE inline void note_excess(CompareStats& s, int64_t i, double excess, double rv, double cv) {
  if (excess > 1.0) ++s.bad;
  if (excess > s.worst_excess) {  // a caller's indices rise: the first of equals stays
    s.worst_excess = excess;
    s.worst_index = i;
    s.worst_reference = rv;
    s.worst_candidate = cv;
  }
}

// Element i, its values as float64 (`integral`: they are integers or bool, and unequal).
CRL_HOST_DEVICE inline void add_element(CompareStats& s, int64_t i, double rv, double cv, double atol, double rtol, bool integral) {
  double excess;
  if (!non_finite_rule(rv, cv, &excess)) {
#if defined(__CUDA_ARCH__)
    const double err = fabs(__dsub_rn(cv, rv));
    const double allowed = fmax(__dadd_rn(atol, __dmul_rn(rtol, fabs(rv))), 1e-300);
    excess = __ddiv_rn(err, allowed);
#else
    const double err = std::fabs(cv - rv);
    const double allowed = std::fmax(atol + rtol * std::fabs(rv), 1e-300);
    excess = err / allowed;
#endif
    s.max_abs_error = s.max_abs_error > err ? s.max_abs_error : err;
    if (integral) excess = INFINITY;
  }
  note_excess(s, i, excess, rv, cv);
}

// Element i of a float32 output with the float32 reference's error `dv` against float64 (0 where
// either reference is not finite: the rules above then decide against rv), its error scale `sv` and
// the largest error scale of its block `bv`.
CRL_HOST_DEVICE inline void add_element_float64(CompareStats& s, int64_t i, double rv, double cv, double dv, double sv, double bv,
                                                double atol, double rtol, double factor) {
  double excess;
  if (!non_finite_rule(rv, cv, &excess)) {
#if defined(__CUDA_ARCH__)
    const double truth = __dadd_rn(rv, dv);
    const double err = fabs(__dsub_rn(cv, truth));
    const double own = fabs(sv);
    const double allowed = fmax(__dadd_rn(__dadd_rn(atol, __dmul_rn(rtol, fabs(truth))), __dmul_rn(factor, fabs(bv))), 1e-300);
    excess = __ddiv_rn(err, allowed);
    s.sum_scale = __dadd_rn(s.sum_scale, __dadd_rn(own, __dmul_rn(kFloat32Roundoff, fabs(truth))));
    s.sum_error = __dadd_rn(s.sum_error, err);
#else
    const double truth = rv + dv;
    const double err = std::fabs(cv - truth);
    const double own = std::fabs(sv);
    const double allowed = std::fmax(atol + rtol * std::fabs(truth) + factor * std::fabs(bv), 1e-300);
    excess = err / allowed;
    s.sum_scale += own + kFloat32Roundoff * std::fabs(truth);
    s.sum_error += err;
#endif
    s.max_abs_error = s.max_abs_error > err ? s.max_abs_error : err;
    rv = truth;  // the worst element is reported against the float64 reference
  }
  note_excess(s, i, excess, rv, cv);
}

// b's elements joined to a's, in either order: the worst is the larger excess, the smaller index of equals.
CRL_HOST_DEVICE inline void join(CompareStats& a, const CompareStats& b) {
  a.bad += b.bad;
  a.sum_error += b.sum_error;
  a.sum_scale += b.sum_scale;
  a.max_abs_error = a.max_abs_error > b.max_abs_error ? a.max_abs_error : b.max_abs_error;
  if (b.worst_excess > a.worst_excess || (b.worst_excess == a.worst_excess && b.worst_index >= 0 && b.worst_index < a.worst_index)) {
    a.worst_excess = b.worst_excess;
    a.worst_index = b.worst_index;
    a.worst_reference = b.worst_reference;
    a.worst_candidate = b.worst_candidate;
  }
}

}  // namespace compare_rule
}  // namespace crl::worker
