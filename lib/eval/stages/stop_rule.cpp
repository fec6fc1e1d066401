// The timing's stop rule (stop_rule.h).
#include "eval/stages/stop_rule.h"

#include <fmt/format.h>

#include <algorithm>

namespace crl::eval {

StopRule StopRule::from(const EvalOptions& options, int min_pairs, double budget_seconds) {
  return {min_pairs,          budget_seconds, options.target_relative_ci, options.max_timed_pairs, options.min_timed_pairs_when_slow,
          options.slow_stop_speedup};
}

bool may_stop_as_slow(const StopRule& rule, int pairs_done, double seconds_spent) {
  // Fewer pairs cannot raise a speedup that is below 1 at best; a program of seconds per call
  // would otherwise spend min_pairs x its call here.
  if (rule.budget_seconds <= 0 || pairs_done < rule.min_pairs_when_slow || pairs_done >= rule.min_pairs) return false;
  return seconds_spent >= rule.budget_seconds;
}

NextRound next_round(const StopRule& rule, int pairs_done, double seconds_spent, const SpeedupEstimate& estimate, bool clearly_slow) {
  if (clearly_slow) {
    return {true, fmt::format("time budget spent, the candidate clearly slower (CI below {:g})", rule.slow_stop_speedup), 0};
  }
  if (pairs_done >= rule.min_pairs && estimate.relative_half_width() <= rule.target_relative_ci) return {true, "CI target reached", 0};
  if (seconds_spent >= rule.budget_seconds && pairs_done >= rule.min_pairs) return {true, "time budget spent", 0};
  if (pairs_done >= rule.max_pairs) return {true, "pair limit reached", 0};
  const double per_pair = std::max(seconds_spent / pairs_done, 1e-6);
  const double left = std::max(rule.budget_seconds - seconds_spent, 0.0);
  const int still_needed = std::max(rule.min_pairs - pairs_done, 1);
  const int pairs = static_cast<int>(
      std::clamp(left / 4 / per_pair, static_cast<double>(still_needed), static_cast<double>(std::max(rule.max_pairs - pairs_done, 1))));
  return {false, "", pairs};
}

}  // namespace crl::eval
