// The measured failure rate of estimate_speedup's 95% interval: on simulated pairs of equal
// programs (true speedup exactly 1), how often the interval misses 1. The evaluator's statistical
// tests (the reference judged against itself must have a CI containing 1.00) fail at this rate.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "eval/timing_stats.h"

namespace crl::eval {
namespace {

struct Coverage {
  int runs = 0;
  int misses = 0;
  double rate() const { return static_cast<double>(misses) / runs; }
};

// Each run times `pairs` back-to-back pairs of one program against itself: a slow machine drift
// shared by both calls of a pair (it cancels in the paired ratio), plus independent log-normal
// noise and a rare 3x outlier (a context switch) on each call.
Coverage simulate_equal_pairs(int runs, int pairs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> standard(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Coverage c;
  for (int run = 0; run < runs; ++run) {
    std::vector<double> reference, candidate;
    double drift = 0;
    for (int i = 0; i < pairs; ++i) {
      drift = 0.95 * drift + 0.02 * standard(rng);
      const auto call = [&] { return 100.0 * std::exp(drift + 0.03 * standard(rng)) * (unit(rng) < 0.02 ? 3.0 : 1.0); };
      reference.push_back(call());
      candidate.push_back(call());
    }
    const SpeedupEstimate e = estimate_speedup(reference, candidate, 1000, /*seed=*/rng());
    ++c.runs;
    if (!(e.ci_low <= 1.0 && 1.0 <= e.ci_high)) ++c.misses;
  }
  return c;
}

// Measured (1000 runs each, this simulation, the default 1000 resamples): 10 pairs miss 1.00 in
// 3.3% of runs, 30 pairs in 1.7%, 100 pairs in 2.1%: with the paired resampling and these
// outliers the interval is conservative, not the nominal 5%. An evaluator test that asks a
// reference judged against itself for a CI containing 1.00 therefore fails about 2 times in 100
// on a quiet machine. The band, 0.5% to 6%, holds the measured rates with room for the binomial
// spread of 1000 runs (sd 0.45% at 2%). The test fails when the interval misses more often than
// a nominal 95% one may (above 6%) or almost never (below 0.5%: an interval grown uselessly wide).
TEST(TimingStatsCoverage, NinetyFivePercentIntervalMissesEqualPairsAtAStatedRate) {
  for (const int pairs : {30, 100}) {
    const Coverage c = simulate_equal_pairs(1000, pairs, 0xc0ffee + pairs);
    EXPECT_GE(c.rate(), 0.005) << pairs << " pairs: " << c.misses << " of " << c.runs << " intervals missed 1.00";
    EXPECT_LE(c.rate(), 0.06) << pairs << " pairs: " << c.misses << " of " << c.runs << " intervals missed 1.00";
    RecordProperty("miss_rate_" + std::to_string(pairs), std::to_string(c.rate()));
  }
}

}  // namespace
}  // namespace crl::eval
