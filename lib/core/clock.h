// The one steady-clock interval helper every timer in crl uses, and how a progress line writes a
// duration ("4m10s").
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

namespace crl {

// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `t` in microseconds of the steady clock (CLOCK_MONOTONIC on Linux: one clock for every process of
// a host, so two processes' readings compare).
inline double steady_us(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

// "42s", "4m10s", "2h05m"; "?" for a duration not known (NaN, negative).
inline std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace crl
