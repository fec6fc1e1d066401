// Names of the hack kinds.
#include "eval/hack_kind.h"

#include <array>
#include <utility>

namespace crl::eval {
namespace {

constexpr std::array<std::pair<HackKind, std::string_view>, 10> kNames = {{
    {HackKind::timer_tampering, "timer_tampering"},
    {HackKind::deferred_work, "deferred_work"},
    {HackKind::input_mutation, "input_mutation"},
    {HackKind::aliasing, "aliasing"},
    {HackKind::output_cache, "output_cache"},
    {HackKind::stale_memory, "stale_memory"},
    {HackKind::batch_copy, "batch_copy"},
    {HackKind::timed_output_mismatch, "timed_output_mismatch"},
    {HackKind::beyond_roofline, "beyond_roofline"},
    {HackKind::remeasure_disagreement, "remeasure_disagreement"},
}};

}  // namespace

std::string_view hack_kind_name(HackKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "";
}

std::optional<HackKind> parse_hack_kind(std::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (n == name) return k;
  }
  return std::nullopt;
}

const std::vector<HackKind>& all_hack_kinds() {
  static const std::vector<HackKind> kinds = [] {
    std::vector<HackKind> out;
    for (const auto& [k, name] : kNames) out.push_back(k);
    return out;
  }();
  return kinds;
}

}  // namespace crl::eval
