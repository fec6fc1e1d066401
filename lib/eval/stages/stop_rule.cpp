// The timing's stop rule (stop_rule.h).
#include "eval/stages/stop_rule.h"

#include <fmt/format.h>

#include <algorithm>

namespace crl::eval {

StopRule StopRule::from(const EvalOptions& options, int min_pairs, double budget_seconds, double max_relative_ci) {
  return {min_pairs,
          budget_seconds,
          options.target_relative_ci,
          options.max_timed_pairs,
          options.min_timed_pairs_when_slow,
          options.slow_stop_speedup,
          max_relative_ci,
          options.time_budget_seconds * std::max(options.noisy_budget_factor, 1.0)};
}

double remeasure_max_relative_ci(double max_relative_ci, double max_disagreement) {
  const double f = std::max(max_disagreement, 1.0);
  return std::min(max_relative_ci, (f - 1) / (f + 1));
}

bool may_stop_as_slow(const StopRule& rule, int pairs_done, double seconds_spent) {
  // Fewer pairs cannot raise a speedup that is below 1 at best; a program of seconds per call
  // would otherwise spend min_pairs x its call here.
  if (rule.budget_seconds <= 0 || pairs_done < rule.min_pairs_when_slow || pairs_done >= rule.min_pairs) return false;
  return seconds_spent >= rule.budget_seconds;
}

bool precise_enough(const StopRule& rule, const SpeedupEstimate& estimate) {
  return estimate.relative_half_width() <= rule.max_relative_ci || estimate.ci_high < rule.slow_stop_speedup;
}

NextRound next_round(const StopRule& rule, int pairs_done, double seconds_spent, const SpeedupEstimate& estimate, bool clearly_slow) {
  const double width = estimate.relative_half_width();
  const bool precise = precise_enough(rule, estimate);
  if (clearly_slow && precise) {
    return {true, fmt::format("time budget spent, the candidate clearly slower (CI below {:g})", rule.slow_stop_speedup), 0};
  }
  if (pairs_done >= rule.min_pairs && width <= rule.target_relative_ci) return {true, "CI target reached", 0};
  const bool enough_pairs = pairs_done >= rule.min_pairs || clearly_slow;
  const bool budget_spent = seconds_spent >= rule.budget_seconds;
  if (budget_spent && enough_pairs && precise) return {true, rule.budget_seconds > 0 ? "time budget spent" : "pairs done", 0};
  const std::string noisy = fmt::format("too noisy: CI +-{:.1f}% after {} pairs in {:.1f} s, wider than the +-{:.1f}% allowed", 100 * width,
                                        pairs_done, seconds_spent, 100 * rule.max_relative_ci);
  if (pairs_done >= rule.max_pairs) return precise ? NextRound{true, "pair limit reached", 0} : NextRound{true, noisy, 0, true};
  if (budget_spent && enough_pairs && seconds_spent >= rule.noisy_budget_seconds) return {true, noisy, 0, true};
  // Past the budget a noisy measurement goes on, a quarter of what the noisy budget allows at a time.
  const double until = budget_spent && enough_pairs ? rule.noisy_budget_seconds : rule.budget_seconds;
  const double per_pair = std::max(seconds_spent / pairs_done, 1e-6);
  const double left = std::max(until - seconds_spent, 0.0);
  const int still_needed = clearly_slow ? 1 : std::max(rule.min_pairs - pairs_done, 1);
  const int pairs = static_cast<int>(
      std::clamp(left / 4 / per_pair, static_cast<double>(still_needed), static_cast<double>(std::max(rule.max_pairs - pairs_done, 1))));
  return {false, "", pairs};
}

}  // namespace crl::eval
