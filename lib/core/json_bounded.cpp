// Nesting-bounded JSON parsing and the JSONL pre-scan (see json_bounded.h).
#include "core/json_bounded.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace crl {
namespace {

// The scanner's state between characters, so that a file can be scanned block by block.
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

void check_jsonl_nesting(const std::string& path, int max_depth) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  // Block by block, never a whole line in memory (a line may be as long as the file). A newline
  // cannot be inside a JSON string, so each one starts a new line's scan.
  std::vector<char> block(std::size_t{1} << 16);
  NestingScan scan;
  int line = 1;
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    const auto got = static_cast<std::size_t>(in.gcount());
    for (std::size_t i = 0; i < got; ++i) {
      if (block[i] == '\n') {
        scan = NestingScan{};
        ++line;
        continue;
      }
      scan.add(block[i]);
      if (scan.deepest > max_depth) throw_too_deep(fmt::format("{}:{}", path, line), max_depth);
    }
  }
}

}  // namespace crl
