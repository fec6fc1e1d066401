// Template bodies for yaml_file.h (kept apart so the header reads as an interface).
#pragma once

#include <fmt/format.h>

namespace crl {

template <typename T>
T yaml_required(const YAML::Node& node, const std::string& key, const std::string& origin) {
  const YAML::Node v = node[key];
  if (!v) {
    throw InputError(fmt::format("{}: missing field '{}'", yaml_where(node, origin), key));
  }
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    throw InputError(fmt::format("{}: field '{}' has the wrong type (value '{}')",
                                 yaml_where(v, origin), key, YAML::Dump(v)));
  }
}

template <typename T>
T yaml_optional(const YAML::Node& node, const std::string& key, const T& fallback,
                const std::string& origin) {
  if (!node[key]) return fallback;
  return yaml_required<T>(node, key, origin);
}

}  // namespace crl
