// JSON from outside crl with its nesting bounded: nlohmann's parser keeps its own stack, but
// dump(), copies and comparisons of what it built recurse once per level, so a line of 100000
// '[' crashes whoever touches the value. Every JSON a user gives crl goes through these.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace crl {

// Far above what any file crl reads nests (config.json, tokenizer.json: under 10 levels).
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text` (strings skipped), counted without parsing
// and stopping at the first level past `stop_above`; 0 for a scalar.
int json_nesting_depth(std::string_view text, int stop_above = kMaxJsonDepth);

// `text` parsed; InputError "<origin>: not valid JSON: ..." or "<origin>: JSON nested deeper
// than N levels" for bad input.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& origin, int max_depth = kMaxJsonDepth);

}  // namespace crl
