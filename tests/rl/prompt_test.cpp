// The prompt's text against golden files, and the completion made from a bare program.
// CRL_UPDATE_GOLDEN=1 rewrites the golden files (review the diff before committing it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "rl/completion.h"
#include "rl/prompt.h"

namespace crl::rl {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_golden(const std::string& text, const std::string& name) {
  const std::string path = std::string(CRL_TEST_DATA_DIR) + "/rl/" + name;
  if (std::getenv("CRL_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << text;
  EXPECT_EQ(text, read_text(path)) << "the prompt differs from " << path;
}

PromptInputs relu_inputs() {
  PromptInputs in;
  in.instructions = "# The crl program format\n\nA program is split by marker lines.\n";
  in.task_id = "level1/019_relu";
  in.reference = "// crl:spec\ntask: level1/019_relu\n// crl:host\nat::Tensor forward(const at::Tensor& x) { return at::relu(x); }\n";
  return in;
}

TEST(Prompt, WithExemplarsMatchesGolden) {
  PromptInputs in = relu_inputs();
  in.exemplars = {{"// crl:host\nat::Tensor forward(const at::Tensor& x) { return x.clamp_min(0); }\n", 1.234},
                  {"// crl:host\nat::Tensor forward(const at::Tensor& x) { return at::relu(x); }", 0.99}};
  const std::string prompt = build_prompt(in);
  expect_golden(prompt, "prompt_with_exemplars.golden.txt");
  // The parts the issue asks for, whatever the golden file says.
  EXPECT_NE(prompt.find("Program A (speedup 1.23x)"), std::string::npos);
  EXPECT_NE(prompt.find("Program B (speedup 0.99x)"), std::string::npos);
  EXPECT_NE(prompt.find("which one was faster, and why"), std::string::npos);
  EXPECT_NE(prompt.find("2. Plan"), std::string::npos);
  EXPECT_NE(prompt.find("one fenced code block"), std::string::npos);
}

TEST(Prompt, WithoutExemplarsSaysSo) {
  const std::string prompt = build_prompt(relu_inputs());
  expect_golden(prompt, "prompt_no_exemplars.golden.txt");
  EXPECT_NE(prompt.find("There are no earlier correct programs for this task yet."), std::string::npos);
  EXPECT_EQ(prompt.find("Program A"), std::string::npos);
}

// The spec's kernelbench_params block (judge metadata, hundreds of lines for a level-3 network) is
// left out of the reference the policy sees; everything around it stays, byte for byte.
TEST(Prompt, TheReferenceIsShownWithoutItsKernelBenchTensors) {
  const std::string block_form =
      "// crl:spec\ntask: level2/001_x\ninit_args: [3]\nkernelbench_params:\n  parameters:\n"
      "    - {name: conv.weight, shape: [o, i], param: w}\n  buffers: []\n// crl:host\nat::Tensor forward();\n";
  EXPECT_EQ(reference_for_prompt(block_form), "// crl:spec\ntask: level2/001_x\ninit_args: [3]\n// crl:host\nat::Tensor forward();\n");
  const std::string flow_form = "// crl:spec\ntask: t\nkernelbench_params: {parameters: [], buffers: []}\nbytes: 1\n// crl:host\nx\n";
  EXPECT_EQ(reference_for_prompt(flow_form), "// crl:spec\ntask: t\nbytes: 1\n// crl:host\nx\n");
  const std::string without = "// crl:spec\ntask: t\n// crl:host\nx";  // no block, no final newline
  EXPECT_EQ(reference_for_prompt(without), without);
  PromptInputs in = relu_inputs();
  in.reference = flow_form;
  EXPECT_EQ(build_prompt(in).find("kernelbench_params"), std::string::npos);
}

TEST(Prompt, CompletionFromProgramParsesBackToTheProgram) {
  const std::string program = "// crl:host\nat::Tensor forward(const at::Tensor& x) { return x; }\n";
  const ParsedCompletion parsed = parse_completion(completion_from_program(program), "sft line 1");
  ASSERT_TRUE(parsed.ok) << parsed.problem;
  EXPECT_EQ(parsed.program_text, program);
}

}  // namespace
}  // namespace crl::rl
