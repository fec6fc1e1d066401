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
    // Compared in float64 in chunks, so full-scale outputs (gigabytes) need no whole-size temporaries.
    const at::Tensor ref_flat = ref.contiguous().view(-1);
    const at::Tensor cand_flat = cand.contiguous().view(-1);
    constexpr int64_t kChunk = int64_t{1} << 22;
    int64_t n_bad = 0;
    double worst_excess = -1;
    for (int64_t begin = 0; begin < ref_flat.numel(); begin += kChunk) {
      const int64_t length = std::min(kChunk, ref_flat.numel() - begin);
      const at::Tensor r = ref_flat.narrow(0, begin, length).to(at::kDouble);
      const at::Tensor c = cand_flat.narrow(0, begin, length).to(at::kDouble);
      const at::Tensor r_nan = r.isnan();
      const at::Tensor c_nan = c.isnan();
      const at::Tensor both_nan = r_nan.logical_and(c_nan);
      const at::Tensor nan_mismatch = r_nan.logical_xor(c_nan);
      const at::Tensor any_inf = r.isinf().logical_or(c.isinf());
      const at::Tensor abs_err = (c - r).abs();
      const at::Tensor allowed = r.abs().mul(tol.rtol).add(tol.atol);
      // How far outside its tolerance each element is (> 1 fails); NaN and Inf rules override.
      at::Tensor excess = abs_err / allowed.clamp_min(1e-300);
      excess.masked_fill_(both_nan.logical_or(any_inf.logical_and(r.eq(c))), 0.0);
      excess.masked_fill_(nan_mismatch.logical_or(any_inf.logical_and(r.ne(c)).logical_and(both_nan.logical_not())),
                          INFINITY);
      const at::Tensor finite_err = abs_err.masked_fill(abs_err.isnan().logical_or(abs_err.isinf()), 0.0);
      result.max_abs_error = std::max(result.max_abs_error, finite_err.max().item<double>());
      n_bad += excess.gt(1.0).sum().item<int64_t>();
      const int64_t local_worst = excess.argmax().item<int64_t>();
      const double local_excess = excess[local_worst].item<double>();
      if (local_excess > worst_excess) {
        worst_excess = local_excess;
        result.worst_index = begin + local_worst;
        result.worst_reference = r[local_worst].item<double>();
        result.worst_candidate = c[local_worst].item<double>();
      }
    }
    if (n_bad == 0) {
      result.worst_index = -1;
      continue;
    }
    result.mismatched_elements = n_bad;
    return fail(fmt::format(
        "{} of {} elements outside atol {:g} + rtol {:g}; worst at flat index {}: got {:.8g}, expected {:.8g}",
        n_bad, ref_flat.numel(), tol.atol, tol.rtol, result.worst_index, result.worst_candidate,
        result.worst_reference));
  }
  result.ok = true;
  return result;
}

}  // namespace crl::eval
