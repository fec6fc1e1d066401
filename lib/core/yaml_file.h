// Loading YAML files and reading typed fields with errors that name the file, field and line.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "core/error.h"

namespace crl {

// Parses `text` (from `origin`, for messages); a syntax error becomes InputError "origin:line:col: ...",
// and so does a document whose aliases expand past 100000 values or 64 levels (a cycle, a "billion
// laughs"): what it returns is safe to walk recursively.
YAML::Node parse_yaml(const std::string& text, const std::string& origin);
YAML::Node load_yaml_file(const std::string& path);
// The bound parse_yaml applies, for YAML loaded elsewhere: InputError naming origin and line when
// `root`, its aliases expanded, holds more than 100000 values or nests deeper than 64 levels.
void check_yaml_expansion(const YAML::Node& root, const std::string& origin);

// node[key] as T; missing or ill-typed fields throw InputError naming origin, key and line.
template <typename T>
T yaml_required(const YAML::Node& node, const std::string& key, const std::string& origin);
template <typename T>
T yaml_optional(const YAML::Node& node, const std::string& key, const T& fallback,
                const std::string& origin);

// "origin:line" for a node (line is 1-based), for messages.
std::string yaml_where(const YAML::Node& node, const std::string& origin);

}  // namespace crl

#include "core/yaml_file_impl.h"
