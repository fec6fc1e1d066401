// A crl stage that learns nothing, seen while it runs: steps in a row in which every group's
// rewards were equal (GRPO's advantages all 0, so the update has no gradient from the rewards),
// said once per such run of steps, so that hours of a dead stage are not spent unseen.
#pragma once

#include <cstdint>
#include <string>

namespace crl::rl {

class ZeroAdvantageWatch {
 public:
  // Warns when `steps_in_a_row` (>= 1) steps in a row had only zero-advantage groups.
  explicit ZeroAdvantageWatch(int64_t steps_in_a_row = 5);
  // A step of the stage `stage` (job step `step`) with its /steps zero_advantage_fraction (NaN: not
  // measured, which ends no run of steps). Returns the warning to log at the step the run reaches
  // `steps_in_a_row`, else "".
  std::string add(const std::string& stage, int64_t step, double zero_advantage_fraction);
  // A new stage starts.
  void reset() { run_ = 0; }

 private:
  int64_t steps_in_a_row_;
  int64_t run_ = 0;
};

}  // namespace crl::rl
