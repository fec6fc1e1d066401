// Nesting-bounded JSON parsing (see json_bounded.h).
#include "core/json_bounded.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace crl {
namespace {

// The scanner's state between characters.
struct NestingScan {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;

  void add(char c) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
};

[[noreturn]] void throw_too_deep(const std::string& origin, int max_depth) {
  throw InputError(fmt::format("{}: JSON nested deeper than {} levels (arrays or objects inside each other); crl reads "
                               "none that deep",
                               origin, max_depth));
}

}  // namespace

int json_nesting_depth(std::string_view text, int stop_above) {
  NestingScan scan;
  for (const char c : text) {
    scan.add(c);
    if (scan.deepest > stop_above) break;
  }
  return scan.deepest;
}

nlohmann::json parse_json_bounded(std::string_view text, const std::string& origin, int max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth) throw_too_deep(origin, max_depth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
}

}  // namespace crl
