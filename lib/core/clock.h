// The one steady-clock interval helper every timer in crl uses.
#pragma once

#include <chrono>

namespace crl {

// Seconds from `start` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace crl
