// YAML parsing with positions in every error message, and a bound on what aliases expand to.
#include "core/yaml_file.h"

#include <utility>
#include <vector>

#include "core/read_file.h"

namespace crl {

std::string yaml_where(const YAML::Node& node, const std::string& origin) {
  const auto mark = node.Mark();
  if (mark.is_null()) return origin;
  return fmt::format("{}:{}", origin, mark.line + 1);
}

// yaml-cpp shares an aliased node instead of copying it, so `&a [*a]` is a node inside itself and
// ten aliases of ten aliases of ... ("billion laughs") a few lines that every recursive reader
// (conversion to JSON, YAML::Dump, comparisons) walks a billion times or forever. This walks the
// document as those readers would, aliases expanded, without recursion, and stops at the bounds.
void check_yaml_expansion(const YAML::Node& root, const std::string& origin) {
  constexpr std::size_t kMaxValues = 100000;  // a job file holds a few hundred
  constexpr int kMaxDepth = 64;               // and nests a few levels
  std::vector<std::pair<YAML::Node, int>> pending{{root, 1}};
  std::size_t values = 1;
  while (!pending.empty()) {
    const auto [node, depth] = std::move(pending.back());
    pending.pop_back();
    if (!node.IsSequence() && !node.IsMap()) continue;
    if (depth >= kMaxDepth) {
      throw InputError(fmt::format("{}: YAML nested deeper than {} levels once its aliases are expanded (an alias "
                                   "inside its own anchor?); write the values out instead",
                                   yaml_where(node, origin), kMaxDepth));
    }
    values += node.size() * (node.IsMap() ? 2 : 1);
    if (values > kMaxValues) {
      throw InputError(fmt::format("{}: YAML holds more than {} values once its aliases are expanded (aliases of "
                                   "aliases?); write the values out instead",
                                   yaml_where(node, origin), kMaxValues));
    }
    for (const auto& item : node) {
      if (node.IsMap()) {
        pending.emplace_back(item.first, depth + 1);
        pending.emplace_back(item.second, depth + 1);
      } else {
        pending.emplace_back(item, depth + 1);
      }
    }
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
  check_yaml_expansion(root, origin);
  return root;
}

YAML::Node load_yaml_file(const std::string& path) {
  return parse_yaml(read_input_file(path, "YAML file"), path);
}

}  // namespace crl
