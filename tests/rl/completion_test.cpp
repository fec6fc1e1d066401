// Completion parsing: the last fenced block is the program; malformed completions are format errors.
#include <gtest/gtest.h>

#include "rl/completion.h"

namespace crl::rl {
namespace {

const std::string kProgram = "// crl:host\nat::Tensor forward(const at::Tensor& x) { return at::relu(x); }\n";

TEST(Completion, TheLastFencedBlockIsTheProgram) {
  const std::string text = "1. Analysis: program A was faster.\n```cpp\n// crl:host\nint old;\n```\n2. Plan\n3.\n```cpp\n" +
                           kProgram + "```\ntrailing words\n";
  const ParsedCompletion p = parse_completion(text, "rollout 1");
  ASSERT_TRUE(p.ok) << p.problem;
  EXPECT_EQ(p.program_text, kProgram);
  EXPECT_TRUE(p.program.host.present);
  EXPECT_EQ(p.program.origin, "rollout 1");
}

TEST(Completion, FencesWithLongerRunsAndIndentation) {
  const ParsedCompletion p = parse_completion("  ````\n" + kProgram + "```\n  ````\n", "r");
  // The inner ``` is shorter than the opening ````, so it is the block's text, not its end.
  ASSERT_TRUE(p.ok) << p.problem;
  EXPECT_EQ(p.program_text, kProgram + "```\n");
  const ParsedCompletion q = parse_completion("  ````c++\n" + kProgram + "````\n", "r");
  EXPECT_TRUE(q.ok) << q.problem;
}

TEST(Completion, NoBlockIsAFormatError) {
  const ParsedCompletion p = parse_completion("I would write a kernel, but here is only prose.\n", "r");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("no fenced code block"), std::string::npos);
  EXPECT_FALSE(parse_completion("", "r").ok);
  EXPECT_FALSE(parse_completion("``` inline ``` only\n", "r").ok);
}

TEST(Completion, AnUnclosedLastBlockIsAFormatErrorEvenAfterAClosedOne) {
  const ParsedCompletion p = parse_completion("```\n" + kProgram + "```\nnow the real one:\n```\n// crl:host\nat::Te", "r");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("not closed"), std::string::npos);
  EXPECT_TRUE(p.program_text.empty());
}

TEST(Completion, ASpecSectionIsAFormatError) {
  const ParsedCompletion p =
      parse_completion("```\n// crl:spec\ntask: level1/019_relu\n" + kProgram + "```\n", "r");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.problem.find("crl:spec"), std::string::npos);
}

TEST(Completion, ABlockThatIsNoProgramIsAFormatError) {
  const ParsedCompletion no_host = parse_completion("```\n// crl:device\nint x;\n```\n", "r");
  EXPECT_FALSE(no_host.ok);
  EXPECT_NE(no_host.problem.find("not a crl program"), std::string::npos);
  const ParsedCompletion bad_marker = parse_completion("```\n// crl:kernel\n" + kProgram + "```\n", "r");
  EXPECT_FALSE(bad_marker.ok);
  const ParsedCompletion prose = parse_completion("```\njust prose in a block\n```\n", "r");
  EXPECT_FALSE(prose.ok);
}

}  // namespace
}  // namespace crl::rl
