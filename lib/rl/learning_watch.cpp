// ZeroAdvantageWatch (learning_watch.h).
#include "rl/learning_watch.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace crl::rl {

ZeroAdvantageWatch::ZeroAdvantageWatch(int64_t steps_in_a_row) : steps_in_a_row_(steps_in_a_row) {
  if (steps_in_a_row < 1) throw InputError(fmt::format("ZeroAdvantageWatch: steps_in_a_row {} must be >= 1", steps_in_a_row));
}

std::string ZeroAdvantageWatch::add(const std::string& stage, int64_t step, double zero_advantage_fraction) {
  if (std::isnan(zero_advantage_fraction)) return "";
  run_ = zero_advantage_fraction >= 1.0 ? run_ + 1 : 0;
  if (run_ != steps_in_a_row_) return "";
  return fmt::format("{} steps {} to {}: in every group all rewards were equal (zero advantage), so these {} updates "
                     "learnt nothing from the rewards; look at the rollouts' statuses (all failing, or all equally fast) "
                     "and at G and the sampling temperature (/steps zero_advantage_fraction)",
                     stage, step - steps_in_a_row_ + 1, step, steps_in_a_row_);
}

}  // namespace crl::rl
