// Linear warm-up then cosine decay (see lr_schedule.h).
#include "rl/lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace crl::rl {

double LrSchedule::lr_at(int64_t step) const {
  if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / decay_steps, 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak_lr * (min_ratio + (1.0 - min_ratio) * cosine);
}

void LrSchedule::validate() const {
  if (!(peak_lr > 0) || warmup_steps < 0 || total_steps < 1 || warmup_steps > total_steps || min_ratio < 0 ||
      min_ratio > 1) {
    throw InputError(fmt::format("learning-rate schedule: need peak_lr > 0, 0 <= warmup_steps <= total_steps, "
                                 "total_steps >= 1, 0 <= min_ratio <= 1; got peak {}, warm-up {}, total {}, min "
                                 "ratio {}", peak_lr, warmup_steps, total_steps, min_ratio));
  }
}

nlohmann::json LrSchedule::to_json() const {
  return {{"peak_lr", peak_lr}, {"warmup_steps", warmup_steps}, {"total_steps", total_steps}, {"min_ratio", min_ratio}};
}

LrSchedule LrSchedule::from_json(const nlohmann::json& j, const std::string& origin) {
  LrSchedule s;
  try {
    s.peak_lr = j.at("peak_lr").get<double>();
    s.warmup_steps = j.at("warmup_steps").get<int64_t>();
    s.total_steps = j.at("total_steps").get<int64_t>();
    s.min_ratio = j.at("min_ratio").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: learning-rate schedule: {}", origin, e.what()));
  }
  s.validate();
  return s;
}

}  // namespace crl::rl
