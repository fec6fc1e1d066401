// YAML parsing with positions in every error message.
#include "core/yaml_file.h"

#include "core/read_file.h"

namespace crl {

std::string yaml_where(const YAML::Node& node, const std::string& origin) {
  const auto mark = node.Mark();
  if (mark.is_null()) return origin;
  return fmt::format("{}:{}", origin, mark.line + 1);
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  return parse_yaml(read_file(path, "YAML file"), path);
}

}  // namespace crl
