// Statistics of timed calls: median, interquartile range, and a paired bootstrap confidence
// interval for the speedup (ratio of medians) that decides when timing may stop.
#pragma once

#include <cstdint>
#include <vector>

#include "core/statistics.h"  // median
#include "eval/verdict.h"

namespace crl::eval {

double quantile(std::vector<double> values, double q);  // linear interpolation, q in [0, 1]
TimeSummary summarize_times(const std::vector<double>& times_us);

struct SpeedupEstimate {
  double speedup = 0;  // median(reference) / median(candidate)
  double ci_low = 0;   // 95% bootstrap percentile interval
  double ci_high = 0;
  // Half the interval's width relative to the speedup: 0.01 means +-1%.
  double relative_half_width() const;
};

// reference_us[i] and candidate_us[i] were timed back to back (in random order) on the same
// inputs, so pairs are resampled together: slow drift of the machine then cancels out.
// Deterministic for a given seed. Throws Error when the lists differ in length or are empty.
SpeedupEstimate estimate_speedup(const std::vector<double>& reference_us,
                                 const std::vector<double>& candidate_us, int resamples = 1000,
                                 uint64_t seed = 0x5eed);

}  // namespace crl::eval
