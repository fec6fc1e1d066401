// Tests that YAML errors name the origin, line and field.
#include <gtest/gtest.h>

#include "core/yaml_file.h"

namespace crl {
namespace {

TEST(YamlFile, SyntaxErrorNamesLineAndColumn) {
  try {
    parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "job.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:"), std::string::npos) << e.what();
  }
}

TEST(YamlFile, MissingFieldNamesKey) {
  const auto node = parse_yaml("a: 1\n", "job.yaml");
  EXPECT_EQ(yaml_required<int>(node, "a", "job.yaml"), 1);
  try {
    yaml_required<int>(node, "steps", "job.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing field 'steps'"), std::string::npos) << e.what();
  }
}

TEST(YamlFile, WrongTypeNamesLine) {
  const auto node = parse_yaml("a: 1\nsteps: many\n", "job.yaml");
  try {
    yaml_required<int>(node, "steps", "job.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("many"), std::string::npos) << e.what();
  }
  EXPECT_EQ(yaml_optional<int>(node, "absent", 7, "job.yaml"), 7);
}

TEST(YamlFile, MissingFileIsBadInput) {
  EXPECT_THROW(load_yaml_file("/nonexistent/job.yaml"), InputError);
}

// yaml-cpp shares aliased nodes: `&a [*a]` is a node inside itself, which every recursive reader
// (YAML::Dump, conversion to JSON) walks forever; parse_yaml refuses it with the line.
TEST(YamlFile, AnAliasInsideItsOwnAnchorIsRefused) {
  try {
    parse_yaml("name: x\nloop: &a [1, *a]\n", "job.yaml");
    FAIL() << "a cyclic document was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job.yaml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64"), std::string::npos) << e.what();
  }
}

// Nine levels of ten aliases each are a billion values once expanded: refused after 100000.
TEST(YamlFile, AnAliasBombIsRefusedQuickly) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    text += fmt::format("a{0}: &a{0} [", level);
    for (int i = 0; i < 10; ++i) text += fmt::format("{}*a{}", i ? ", " : "", level - 1);
    text += "]\n";
  }
  try {
    parse_yaml(text, "bomb.yaml");
    FAIL() << "an alias bomb was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100000 values"), std::string::npos) << e.what();
  }
}

// Aliases within the bound stay usable (a value written once, used twice).
TEST(YamlFile, ABoundedAliasIsKept) {
  const auto root = parse_yaml("base: &b {lr: 0.1}\nstage: *b\n", "job.yaml");
  EXPECT_EQ(root["stage"]["lr"].as<double>(), 0.1);
}

}  // namespace
}  // namespace crl
