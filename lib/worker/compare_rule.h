// The rule of an output comparison for one element, and how two partial results join: shared by
// the CPU pass (output_comparison.cpp) and the GPU kernel (compare_values_cuda.cu), so that the
// judge decides alike wherever the outputs are. Each element in float64: |c - r| <= atol + rtol * |r|,
// rounded step by step (no fused multiply-add on either side); NaN only where both are NaN;
// infinities must be equal; integers and bool exact (the caller skips equal ones). The worst element
// is the one of largest excess, the first of equal ones.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CRL_HOST_DEVICE __host__ __device__
#else
#define CRL_HOST_DEVICE
#endif

namespace crl::worker {

struct CompareStats {
  int64_t bad = 0;           // elements outside the tolerance or breaking a NaN/Inf rule
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

// Element i, its values as float64 (`integral`: they are integers or bool, and unequal).
CRL_HOST_DEVICE inline void add_element(CompareStats& s, int64_t i, double rv, double cv, double atol, double rtol, bool integral) {
  double excess;
  const bool r_nan = is_nan(rv), c_nan = is_nan(cv);
  if (r_nan || c_nan) {
    excess = r_nan && c_nan ? 0.0 : INFINITY;
  } else if (is_inf(rv) || is_inf(cv)) {
    excess = rv == cv ? 0.0 : INFINITY;
  } else {
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
  if (excess > 1.0) ++s.bad;
  if (excess > s.worst_excess) {  // a caller's indices rise: the first of equals stays
    s.worst_excess = excess;
    s.worst_index = i;
    s.worst_reference = rv;
    s.worst_candidate = cv;
  }
}

// b's elements joined to a's, in either order: the worst is the larger excess, the smaller index of equals.
CRL_HOST_DEVICE inline void join(CompareStats& a, const CompareStats& b) {
  a.bad += b.bad;
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
