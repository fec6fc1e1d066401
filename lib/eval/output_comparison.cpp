// Output comparison in float64 (on the CPU one parallel pass; on a GPU, ATen in chunks where the
// outputs live), with NaN/Inf rules and the worst element reported.
#include "eval/output_comparison.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <sstream>

namespace crl::eval {

namespace {

std::string shape_text(const at::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

std::string dtype_text(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

// What comparing one output's values found.
struct ValueStats {
  int64_t bad = 0;              // elements outside the tolerance (or breaking the NaN/Inf rules)
  double max_abs_error = 0;     // over elements whose error is finite
  double worst_excess = -1;     // error / allowed error of the worst element (infinity: a rule broken)
  int64_t worst_index = -1;
  double worst_reference = 0, worst_candidate = 0;

  void add(const ValueStats& o) {
    bad += o.bad;
    max_abs_error = std::max(max_abs_error, o.max_abs_error);
    if (o.worst_excess > worst_excess || (o.worst_excess == worst_excess && o.worst_index < worst_index)) {
      worst_excess = o.worst_excess;
      worst_index = o.worst_index;
      worst_reference = o.worst_reference;
      worst_candidate = o.worst_candidate;
    }
  }
};

// One pass over both tensors (contiguous, same shape and dtype), in parallel, each element in
// float64: |c - r| <= atol + rtol * |r|; NaN only where both are NaN; infinities equal. Integer
// and bool values are exact (their tolerance is 0) and compared through float64 too, except that
// 64-bit integers beyond 2^53 compare exactly by value. Memory-bound: the earlier form (chunks
// converted to float64 tensors, a dozen ATen passes) compared 256 MiB in 2.6 s here.
ValueStats compare_values(const at::Tensor& ref, const at::Tensor& cand, const Tolerance& tol) {
  ValueStats total;
  std::mutex mutex;
  const int64_t n = ref.numel();
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, ref.scalar_type(), "compare_values", [&] {
    const scalar_t* r = ref.const_data_ptr<scalar_t>();
    const scalar_t* c = cand.const_data_ptr<scalar_t>();
    at::parallel_for(0, n, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
      ValueStats local;
      for (int64_t i = begin; i < end; ++i) {
        if constexpr (std::is_integral_v<scalar_t>) {
          if (r[i] == c[i]) continue;
        }
        const double rv = static_cast<double>(r[i]);
        const double cv = static_cast<double>(c[i]);
        double excess;
        const bool r_nan = std::isnan(rv), c_nan = std::isnan(cv);
        if (r_nan || c_nan) {
          excess = r_nan && c_nan ? 0.0 : INFINITY;
        } else if (std::isinf(rv) || std::isinf(cv)) {
          excess = rv == cv ? 0.0 : INFINITY;
        } else {
          const double err = std::fabs(cv - rv);
          local.max_abs_error = std::max(local.max_abs_error, err);
          excess = err / std::max(tol.atol + tol.rtol * std::fabs(rv), 1e-300);
          if constexpr (std::is_integral_v<scalar_t>) excess = INFINITY;  // unequal integers
        }
        if (excess > 1.0) ++local.bad;
        if (excess > local.worst_excess) {
          local.worst_excess = excess;
          local.worst_index = i;
          local.worst_reference = rv;
          local.worst_candidate = cv;
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      total.add(local);
    });
  });
  return total;
}

// The same rules on the device that holds both tensors (the judge compares on the GPU, where the
// outputs are), in chunks so that full-scale outputs need only bounded temporaries.
ValueStats compare_values_on_device(const at::Tensor& ref, const at::Tensor& cand, const Tolerance& tol) {
  ValueStats total;
  const at::Tensor rf = ref.reshape({-1});
  const at::Tensor cf = cand.reshape({-1});
  const bool integral = !at::isFloatingType(ref.scalar_type());
  constexpr int64_t kChunk = int64_t{1} << 25;
  for (int64_t begin = 0; begin < rf.numel(); begin += kChunk) {
    const int64_t length = std::min(kChunk, rf.numel() - begin);
    const at::Tensor r0 = rf.narrow(0, begin, length);
    const at::Tensor c0 = cf.narrow(0, begin, length);
    at::Tensor excess;
    at::Tensor err;
    const at::Tensor r = r0.to(at::kDouble);
    const at::Tensor c = c0.to(at::kDouble);
    if (integral) {
      excess = at::where(at::ne(r0, c0), INFINITY, 0.0).to(at::kDouble);
      err = at::zeros_like(r);
    } else {
      err = (c - r).abs();
      const at::Tensor allowed = (r.abs() * tol.rtol + tol.atol).clamp_min(1e-300);
      const at::Tensor r_nan = at::isnan(r), c_nan = at::isnan(c);
      const at::Tensor any_inf = at::isinf(r) | at::isinf(c);
      excess = at::where(r_nan | c_nan, at::where(r_nan & c_nan, 0.0, INFINITY).to(at::kDouble),
                         at::where(any_inf, at::where(at::eq(r, c), 0.0, INFINITY).to(at::kDouble), err / allowed));
      err = at::where(at::isfinite(err), err, 0.0);
    }
    const int64_t bad = (excess > 1.0).sum().item<int64_t>();
    ValueStats local;
    local.bad = bad;
    local.max_abs_error = err.max().item<double>();
    if (bad > 0) {
      const int64_t worst = excess.argmax().item<int64_t>();
      local.worst_excess = excess[worst].item<double>();
      local.worst_index = begin + worst;
      local.worst_reference = r[worst].item<double>();
      local.worst_candidate = c[worst].item<double>();
    }
    total.add(local);
  }
  return total;
}

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
    if (ref.device() != cand.device()) return fail("is not where the reference's output is (crl compares like with like)");
    const ValueStats stats = ref.is_cpu() ? compare_values(ref.contiguous(), cand.contiguous(), tol)
                                          : compare_values_on_device(ref, cand, tol);
    result.max_abs_error = std::max(result.max_abs_error, stats.max_abs_error);
    if (stats.bad == 0) continue;
    result.worst_index = stats.worst_index;
    result.worst_reference = stats.worst_reference;
    result.worst_candidate = stats.worst_candidate;
    result.mismatched_elements = stats.bad;
    return fail(fmt::format(
        "{} of {} elements outside atol {:g} + rtol {:g}; worst at flat index {}: got {:.8g}, expected {:.8g}",
        stats.bad, ref.numel(), tol.atol, tol.rtol, result.worst_index, result.worst_candidate,
        result.worst_reference));
  }
  result.ok = true;
  return result;
}

bool batch_copy_would_pass(const std::vector<ProgramOutput>& outputs, const ToleranceForDtype& tolerance_for) {
  bool any_batch = false;
  for (const auto& out : outputs) {
    if (out.values.dim() < 1 || out.values.size(0) < 2) continue;
    any_batch = true;
    // Sample by sample against sample 0, so nothing of the output's size is allocated, and the
    // usual case (samples differ) stops at the first.
    const std::vector<ProgramOutput> first{{out.values.narrow(0, 0, 1), out.device}};
    for (int64_t b = 1; b < out.values.size(0); ++b) {
      if (!compare_outputs({{out.values.narrow(0, b, 1), out.device}}, first, tolerance_for).ok) return false;
    }
  }
  return any_batch;
}

}  // namespace crl::eval
