// The job's watch over evaluation that fails for everything (job key eval.max_failed_steps).
#pragma once

#include <cstdint>
#include <string>

namespace crl::rl {

// Rank 0 feeds it each judged step. An internal_error verdict (crl's own failure: the reference's
// worker did not start, the judge failed) is left out of the rewards, so a step whose every judged
// program got one trains on nothing; a job whose evaluation fails for everything (a sandbox the
// machine's CUDA driver does not start under, a missing toolchain) would run for hours learning
// nothing, its rows saying only n_internal_error. After `limit` such steps in a row the job stops.
class FailingEvaluationWatch {
 public:
  explicit FailingEvaluationWatch(int limit) : limit_(limit) {}

  // One step: how many of its programs reached an evaluator, how many of those got internal_error,
  // and the first one's description. A step with no judged program (all format errors) says
  // nothing about evaluation and leaves the count as it was. Returns the message that stops the
  // job, or an empty string to go on.
  std::string step(int64_t step, int64_t judged, int64_t internal_errors, const std::string& first);

  int failed_in_a_row() const { return in_a_row_; }

 private:
  int limit_;  // 0: never stop
  int in_a_row_ = 0;
  std::string first_;  // the first failure of the run of failed steps
};

}  // namespace crl::rl
