// Small statistics shared across modules: the median of a sample and a 64-bit integer mixer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace crl {

// The median of `values`, reordering them (for callers that reuse a scratch buffer): the mean of
// the two middle values for an even count; 0 for an empty sample. O(n).
inline double median_in_place(std::span<double> values) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n / 2), values.end());
  const double upper = values[n / 2];
  if (n % 2 == 1) return upper;
  return 0.5 * (*std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n / 2)) + upper);
}

// The median (the mean of the two middle values for an even count); 0 for an empty sample.
inline double median(std::vector<double> values) { return median_in_place(values); }

// SplitMix64's finaliser: a bijection that turns nearby seeds into unrelated 64-bit values.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace crl
