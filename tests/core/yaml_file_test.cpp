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

TEST(YamlFile, MissingFileIsAnIoError) {
  EXPECT_THROW(load_yaml_file("/nonexistent/job.yaml"), IoError);
}

}  // namespace
}  // namespace crl
