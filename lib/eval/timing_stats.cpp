// Median, IQR and the paired bootstrap of the ratio of medians.
#include "eval/timing_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"

namespace crl::eval {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  // An infinite end (a ratio over a time of 0) is the answer wherever it weighs at all: inf - inf
  // made NaN, which a verdict cannot carry (a job's trainer refused one and the job ended).
  if (values[hi] == values[lo] || std::isinf(values[lo])) return values[lo];
  if (std::isinf(values[hi])) return frac > 0 ? values[hi] : values[lo];
  return values[lo] + (values[hi] - values[lo]) * frac;
}

TimeSummary summarize_times(const std::vector<double>& times_us) {
  TimeSummary t;
  t.samples = static_cast<int>(times_us.size());
  t.median_us = median(times_us);
  t.iqr_us = quantile(times_us, 0.75) - quantile(times_us, 0.25);
  return t;
}

double SpeedupEstimate::relative_half_width() const { return eval::relative_half_width(speedup, ci_low, ci_high); }

namespace {

// The median of values[idx[0..n)] using `scratch`, so a resample allocates nothing.
double median_of(const std::vector<double>& values, const std::vector<uint32_t>& idx,
                 std::vector<double>& scratch) {
  scratch.resize(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) scratch[i] = values[idx[i]];
  return median_in_place(scratch);
}

}  // namespace

SpeedupEstimate estimate_speedup(const std::vector<double>& reference_us,
                                 const std::vector<double>& candidate_us, int resamples, uint64_t seed) {
  if (reference_us.size() != candidate_us.size() || reference_us.empty()) {
    throw Error("estimate_speedup: need the same positive number of reference and candidate times (got " +
                std::to_string(reference_us.size()) + " and " + std::to_string(candidate_us.size()) + ")");
  }
  SpeedupEstimate e;
  const double cand_median = median(candidate_us);
  e.speedup = cand_median > 0 ? median(reference_us) / cand_median : INFINITY;
  const size_t n = reference_us.size();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick(0, static_cast<uint32_t>(n - 1));
  std::vector<uint32_t> idx(n);
  std::vector<double> scratch;
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (auto& i : idx) i = pick(rng);
    const double c = median_of(candidate_us, idx, scratch);
    ratios.push_back(c > 0 ? median_of(reference_us, idx, scratch) / c : INFINITY);
  }
  e.ci_low = quantile(ratios, 0.025);
  e.ci_high = quantile(ratios, 0.975);
  return e;
}

}  // namespace crl::eval
