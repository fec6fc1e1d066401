// The timed batch's size.
#include "eval/batch_plan.h"

#include <algorithm>
#include <cmath>

namespace crl::eval {

int plan_timed_batch(uint64_t slot_bytes, uint64_t output_bytes, double reference_call_us, const BatchPlanLimits& limits) {
  const uint64_t for_caches = (uint64_t{256} << 20) / std::max<uint64_t>(slot_bytes, 1) + 1;
  const uint64_t for_duration = static_cast<uint64_t>(std::ceil(limits.min_batch_us / std::max(reference_call_us, 1.0)));
  uint64_t slots = std::max<uint64_t>({std::min<uint64_t>(for_caches, static_cast<uint64_t>(limits.max_slots)),
                                       std::min<uint64_t>(for_duration, static_cast<uint64_t>(limits.max_batch_calls)), 1});
  slots = std::min(slots, limits.arena_bytes / std::max<uint64_t>(slot_bytes, 1));
  slots = std::min(slots, limits.batch_output_bytes / std::max<uint64_t>(output_bytes, 1));
  return static_cast<int>(std::max<uint64_t>(slots, 1));
}

}  // namespace crl::eval
