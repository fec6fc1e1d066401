// When timing stops, and how many pairs the next round times: a pure rule, tested on its own.
#pragma once

#include <string>

#include "eval/eval_options.h"
#include "eval/timing_stats.h"

namespace crl::eval {

struct StopRule {
  int min_pairs = 20;
  double budget_seconds = 10;      // 0: no budget (min_pairs pairs, unless too noisy: the re-measure)
  double target_relative_ci = 0.01;
  int max_pairs = 10000;
  int min_pairs_when_slow = 5;
  double slow_stop_speedup = 0.5;
  // The widest interval (relative half width) a measurement may end with: wider once the budget is
  // spent, it goes on until noisy_budget_seconds; wider still then, it ends too noisy.
  double max_relative_ci = 0.1;
  double noisy_budget_seconds = 30;
  // `max_relative_ci` of the measurement (the re-measure's is narrower where its factor needs it).
  static StopRule from(const EvalOptions& options, int min_pairs, double budget_seconds, double max_relative_ci);
};

// Whether a candidate may stop early as clearly slower: the budget spent, at least
// min_pairs_when_slow pairs but fewer than min_pairs. The caller then asks whether its speedup's
// interval lies wholly below slow_stop_speedup (a bootstrap: only computed when this holds).
bool may_stop_as_slow(const StopRule& rule, int pairs_done, double seconds_spent);

struct NextRound {
  bool stop = false;
  std::string reason;      // why it stopped
  int pairs = 0;           // otherwise: pairs to time in the next round
  bool too_noisy = false;  // it stopped with its interval still wider than max_relative_ci
};
// Whether a measurement is precise enough to end: its interval within max_relative_ci, or wholly
// below slow_stop_speedup (a clearly slower program: its reward, the interval's upper bound, stays
// below that whatever the noise, so no noise makes it the reference's equal; measuring it on would
// cost the most for the slowest programs, and leaving it out of training would lose the one signal
// it gives, that it is slow).
bool precise_enough(const StopRule& rule, const SpeedupEstimate& estimate);

// After a round: stop (the candidate clearly slow, the interval narrow enough, the budget spent,
// the pair limit reached), else a quarter of what the budget still allows, at least what min_pairs
// still needs. No stop but the CI target's ends a measurement that is not precise_enough: past the
// budget it goes on, within noisy_budget_seconds, and past that (or the pair limit) it stops
// too_noisy: noise is never paid as speed, and a noisy re-measure never counts as agreement.
NextRound next_round(const StopRule& rule, int pairs_done, double seconds_spent, const SpeedupEstimate& estimate, bool clearly_slow);

// The widest interval a re-measure may end with: max_relative_ci, and narrow enough to disagree by
// `max_disagreement` at all (an interval of half width h spans (1+h)/(1-h): h = (f-1)/(f+1) spans f).
double remeasure_max_relative_ci(double max_relative_ci, double max_disagreement);

}  // namespace crl::eval
