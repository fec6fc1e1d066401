// Bitwise comparison, chunked tolerance counting and the degenerate-output rule.
#include "suite/output_checks.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

namespace crl {
namespace {

// Elements per chunk in fraction_close: 128 Mi floats is 512 MiB per temporary.
constexpr int64_t kChunk = int64_t{1} << 27;

at::ScalarType same_size_integer(at::ScalarType dtype) {
  switch (c10::elementSize(dtype)) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    default: return at::kLong;
  }
}

// Up to `n` evenly spaced elements of `t` (flattened), as float64 on the CPU.
at::Tensor sample_elements(const at::Tensor& flat, int64_t n) {
  const int64_t numel = flat.numel();
  const int64_t step = std::max<int64_t>(1, numel / n);
  return flat.slice(0, 0, numel, step).to(at::kDouble).cpu();
}

std::string fmt_value(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes() || a.device() != b.device()) return false;
  if (a.numel() == 0) return true;
  const auto as = a.contiguous(), bs = b.contiguous();
  if (as.scalar_type() == at::kBool) return at::equal(as, bs);
  const auto bits = same_size_integer(as.scalar_type());
  return at::equal(as.view(bits), bs.view(bits));
}

double fraction_close(const at::Tensor& a, const at::Tensor& b, const Tolerance& tolerance) {
  const int64_t numel = a.numel();
  if (numel == 0) return 1.0;
  const at::Tensor fa = a.contiguous().reshape({-1});
  const at::Tensor fb = b.to(a.device()).expand(a.sizes()).contiguous().reshape({-1});
  const bool floating = at::isFloatingType(a.scalar_type()) || at::isFloatingType(b.scalar_type());
  int64_t close = 0;
  for (int64_t begin = 0; begin < numel; begin += kChunk) {
    const int64_t len = std::min(kChunk, numel - begin);
    const at::Tensor ca = fa.narrow(0, begin, len), cb = fb.narrow(0, begin, len);
    at::Tensor ok;
    if (floating) {
      const at::Tensor x = ca.to(at::kFloat), y = cb.to(at::kFloat);
      at::Tensor diff = (x - y).abs_();
      at::Tensor bound = y.abs().mul_(tolerance.rtol).add_(tolerance.atol);
      ok = diff.le(bound).logical_or_(x.isnan().logical_and_(y.isnan()));
    } else {
      ok = ca.eq(cb);
    }
    close += ok.sum().item<int64_t>();
  }
  return static_cast<double>(close) / static_cast<double>(numel);
}

std::vector<OutputFinding> degenerate_findings(const TaskSpec& spec, const std::vector<at::Tensor>& args,
                                               const std::vector<at::Tensor>& outputs,
                                               const std::vector<at::Tensor>& other_seed_outputs,
                                               const DegenerateRule& rule) {
  std::vector<OutputFinding> findings;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const at::Tensor& out = outputs[i];
    const Tolerance tol = spec.tolerance_for(out.scalar_type());
    const bool floating = at::isFloatingType(out.scalar_type());
    if (floating && out.numel() > 0 && !at::isfinite(out).all().item<bool>()) {
      const int64_t bad = out.numel() - at::isfinite(out).sum().item<int64_t>();
      findings.push_back({"non_finite", i, static_cast<double>(bad) / out.numel(),
                          fmt::format("output {} has {} NaN or infinite elements of {}", i, bad, out.numel())});
    }
    // One constant: the median of a sample is the value most elements sit near when most are equal.
    if (out.numel() > 1) {
      const at::Tensor flat = out.contiguous().reshape({-1});
      const double median = at::median(sample_elements(flat, int64_t{1} << 20)).item<double>();
      const at::Tensor constant = at::scalar_tensor(median, at::TensorOptions().dtype(at::kDouble).device(out.device()))
                                      .to(floating ? out.scalar_type() : at::kDouble);
      const double fraction = fraction_close(out, constant, tol);
      if (fraction >= rule.fraction) {
        findings.push_back({"constant", i, fraction,
                            fmt::format("output {}: {:.4g}% of its {} elements are within tolerance (atol {}, rtol {}) "
                                        "of the constant {}",
                                        i, 100 * fraction, out.numel(), tol.atol, tol.rtol, fmt_value(median))});
      }
    }
    // An input returned as it is (or almost): the operation did nothing on these inputs.
    for (size_t a = 0; a < args.size() && a < spec.num_args(); ++a) {
      if (args[a].sizes() != out.sizes()) continue;
      const double fraction = fraction_close(out, args[a], tol);
      if (fraction >= rule.fraction) {
        findings.push_back({"equals_input", i, fraction,
                            fmt::format("output {}: {:.4g}% of its elements are within tolerance of argument '{}'", i,
                                        100 * fraction, spec.arg(a).name)});
      }
    }
    // The same result from different inputs: the output does not depend on the inputs' values.
    if (i < other_seed_outputs.size() && other_seed_outputs[i].sizes() == out.sizes()) {
      const double fraction = fraction_close(other_seed_outputs[i], out, tol);
      if (fraction >= rule.fraction) {
        std::string values;
        if (out.numel() == 1) {
          values = fmt::format(" ({} and {})", fmt_value(out.to(at::kDouble).item<double>()),
                               fmt_value(other_seed_outputs[i].to(at::kDouble).item<double>()));
        }
        findings.push_back({"seed_independent", i, fraction,
                            fmt::format("output {}: {:.4g}% of its elements are within tolerance across two seeds{}", i,
                                        100 * fraction, values)});
      }
    }
  }
  return findings;
}

}  // namespace crl
