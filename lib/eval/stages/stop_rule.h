// When timing stops, and how many pairs the next round times: a pure rule, tested on its own.
#pragma once

#include <string>

#include "eval/eval_options.h"
#include "eval/timing_stats.h"

namespace crl::eval {

struct StopRule {
  int min_pairs = 20;
  double budget_seconds = 10;      // 0: no budget (a fixed number of pairs: the re-measure)
  double target_relative_ci = 0.01;
  int max_pairs = 10000;
  int min_pairs_when_slow = 5;
  double slow_stop_speedup = 0.5;
  static StopRule from(const EvalOptions& options, int min_pairs, double budget_seconds);
};

// Whether a candidate may stop early as clearly slower: the budget spent, at least
// min_pairs_when_slow pairs but fewer than min_pairs. The caller then asks whether its speedup's
// interval lies wholly below slow_stop_speedup (a bootstrap: only computed when this holds).
bool may_stop_as_slow(const StopRule& rule, int pairs_done, double seconds_spent);

struct NextRound {
  bool stop = false;
  std::string reason;  // why it stopped
  int pairs = 0;       // otherwise: pairs to time in the next round
};
// After a round: stop (the candidate clearly slow, the interval narrow enough, the budget spent,
// the pair limit reached), else a quarter of what the budget still allows, at least what min_pairs
// still needs.
NextRound next_round(const StopRule& rule, int pairs_done, double seconds_spent, const SpeedupEstimate& estimate, bool clearly_slow);

}  // namespace crl::eval
