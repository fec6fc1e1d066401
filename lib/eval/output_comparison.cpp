// Output comparison on the CPU in float64, with NaN/Inf rules and the worst element reported.
#include "eval/output_comparison.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <sstream>

namespace crl::eval {

Tolerance default_tolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble: return {1e-4, 1e-4};
    case at::kHalf:
    case at::kBFloat16: return {1e-2, 1e-2};
    default: return {0, 0};
  }
}

namespace {

std::string shape_text(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

std::string dtype_text(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

}  // namespace

ComparisonResult compare_outputs(const std::vector<ProgramOutput>& reference,
                                 const std::vector<ProgramOutput>& candidate,
                                 const ToleranceForDtype& tolerance_for) {
  ComparisonResult result;
  if (reference.size() != candidate.size()) {
    result.message = fmt::format("returned {} outputs, the reference returns {}", candidate.size(), reference.size());
    return result;
  }
  for (size_t i = 0; i < reference.size(); ++i) {
    const at::Tensor& ref = reference[i].values;
    const at::Tensor& cand = candidate[i].values;
    const int index = static_cast<int>(i);
    auto fail = [&](std::string message) {
      result.ok = false;
      result.output_index = index;
      result.message = fmt::format("output {}: {}", i, message);
      return result;
    };
    if (!cand.defined()) return fail("is an undefined tensor");
    if (ref.sizes() != cand.sizes()) {
      return fail(fmt::format("shape {} but the reference's is {}", shape_text(cand), shape_text(ref)));
    }
    if (ref.scalar_type() != cand.scalar_type()) {
      return fail(fmt::format("dtype {} but the reference's is {}", dtype_text(cand), dtype_text(ref)));
    }
    if (reference[i].device != candidate[i].device) {
      return fail(fmt::format("on device {} but the reference's is on {}", candidate[i].device, reference[i].device));
    }
    if (ref.numel() == 0) continue;
    const Tolerance tol = tolerance_for(ref.scalar_type());
    const at::Tensor r = ref.to(at::kDouble).flatten();
    const at::Tensor c = cand.to(at::kDouble).flatten();
    const at::Tensor r_nan = r.isnan();
    const at::Tensor c_nan = c.isnan();
    const at::Tensor both_nan = r_nan.logical_and(c_nan);
    const at::Tensor r_inf = r.isinf();
    const at::Tensor c_inf = c.isinf();
    const at::Tensor abs_err = (c - r).abs();
    const at::Tensor allowed = r.abs().mul(tol.rtol).add(tol.atol);
    // How far outside its tolerance each element is: > 1 fails; NaN and Inf rules make it huge.
    at::Tensor excess = abs_err / allowed.clamp_min(1e-300);
    const at::Tensor nan_mismatch = r_nan.logical_xor(c_nan);
    const at::Tensor inf_mismatch = r_inf.logical_or(c_inf).logical_and(r.ne(c)).logical_and(nan_mismatch.logical_not())
                                        .logical_and(both_nan.logical_not());
    excess = excess.masked_fill(both_nan, 0.0);
    excess = excess.masked_fill(r_inf.logical_and(r.eq(c)), 0.0);
    excess = excess.masked_fill(nan_mismatch.logical_or(inf_mismatch), INFINITY);
    const at::Tensor bad = excess.gt(1.0);
    const at::Tensor finite_err = abs_err.masked_fill(abs_err.isnan().logical_or(abs_err.isinf()), 0.0);
    result.max_abs_error = std::max(result.max_abs_error, finite_err.max().item<double>());
    const int64_t n_bad = bad.sum().item<int64_t>();
    if (n_bad == 0) continue;
    const int64_t worst = excess.argmax().item<int64_t>();
    result.mismatched_elements = n_bad;
    result.worst_index = worst;
    result.worst_reference = r[worst].item<double>();
    result.worst_candidate = c[worst].item<double>();
    return fail(fmt::format(
        "{} of {} elements outside atol {:g} + rtol {:g}; worst at flat index {}: got {:.8g}, expected {:.8g}",
        n_bad, r.numel(), tol.atol, tol.rtol, worst, result.worst_candidate, result.worst_reference));
  }
  result.ok = true;
  return result;
}

}  // namespace crl::eval
