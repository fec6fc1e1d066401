// The examples of docs/program-format.md parse with the code that defines the format.
#include <gtest/gtest.h>

#include "format_doc_examples.h"
#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl {
namespace {

TEST(FormatDoc, SpecSectionExampleParses) {
  const std::string spec_text = testing::format_doc_example("## The spec section (references)");
  ASSERT_FALSE(spec_text.empty());
  const TaskSpec spec = parse_task_spec({true, spec_text, 1}, "program-format.md");
  EXPECT_EQ(spec.id, "level1/019_relu");
  EXPECT_EQ(spec.name, "ReLU");
  EXPECT_EQ(spec.num_args(), 2u);
  ASSERT_TRUE(spec.tolerance.has_value());
  EXPECT_DOUBLE_EQ(spec.tolerance->atol, 1e-4);
  EXPECT_DOUBLE_EQ(spec.bytes_at("small"), 2.0 * 4 * 16 * 4096);
  ASSERT_TRUE(spec.init_args.has_value());
  EXPECT_TRUE(spec.init_args->empty());
  ASSERT_TRUE(spec.kernelbench_params.has_value());
  ASSERT_EQ(spec.kernelbench_params->parameters.size(), 1u);
  EXPECT_EQ(spec.kernelbench_params->parameters[0].name, "linear.weight");
  EXPECT_EQ(spec.kernelbench_params->parameters[0].param, std::optional<size_t>(0));
}

TEST(FormatDoc, ReferenceExampleParsesAndMakesArguments) {
  const std::string text = testing::format_doc_example("A reference:");
  ASSERT_FALSE(text.empty());
  const ProgramText program = parse_program_text(text, "program-format.md");
  const TaskSpec spec = parse_task_spec(program.spec, program.origin);
  const auto args = make_arguments(spec, "small", 0, at::Device(at::kCPU));
  ASSERT_EQ(args.size(), 1u);
  EXPECT_EQ(args[0].sizes(), (std::vector<int64_t>{16, 4096}));
}

TEST(FormatDoc, CandidateExampleParses) {
  const ProgramText program =
      parse_program_text(testing::format_doc_example("A CUDA candidate for it:"), "program-format.md");
  EXPECT_FALSE(program.spec.present);
  EXPECT_TRUE(program.device.present);
  EXPECT_NE(program.host.text.find("forward"), std::string::npos);
}

}  // namespace
}  // namespace crl
