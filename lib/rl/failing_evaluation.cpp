// The job's watch over evaluation that fails for everything (see failing_evaluation.h).
#include "rl/failing_evaluation.h"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

namespace crl::rl {

std::string FailingEvaluationWatch::step(int64_t step, int64_t judged, int64_t internal_errors, const std::string& first) {
  if (judged == 0) return {};
  if (internal_errors < judged) {
    in_a_row_ = 0;
    first_.clear();
    return {};
  }
  if (in_a_row_++ == 0) first_ = first;
  if (limit_ == 0 || in_a_row_ < limit_) {
    spdlog::warn("step {}: every judged program ({}) got internal_error, crl's own failure ({} step(s) in a row; {}): {}", step,
                 judged, in_a_row_,
                 limit_ == 0 ? std::string("eval.max_failed_steps 0: the job goes on")
                             : fmt::format("the job stops at {}, eval.max_failed_steps", limit_),
                 first);
    return {};
  }
  return fmt::format("evaluation failed: every program judged in the last {} step(s) (to step {}) got internal_error, crl's "
                     "own failure, not the policy's; the first: {} (the rows, logs and a checkpoint are written; fix the "
                     "cause, `crl eval` one of the programs to see it, and run the same command to resume)",
                     in_a_row_, step, first_);
}

}  // namespace crl::rl
