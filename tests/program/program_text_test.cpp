// Tests of parse_program_text: sections, their first lines, and errors with the file's line numbers.
#include <gtest/gtest.h>

#include "core/error.h"
#include "program/program_text.h"

namespace crl {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_program_text(text, "p.crl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProgramText, SplitsSectionsAndRecordsTheirFirstLines) {
  const std::string text =
      "// a comment before the first marker\n"
      "\n"
      "// crl:spec\n"
      "task: level1/001_x\n"
      "// crl:device\n"
      "__global__ void k() {}\n"
      "// crl:host\n"
      "at::Tensor forward(const at::Tensor& x) { return x; }\n";
  const ProgramText p = parse_program_text(text, "p.crl");
  EXPECT_EQ(p.origin, "p.crl");
  ASSERT_TRUE(p.spec.present);
  EXPECT_EQ(p.spec.text, "task: level1/001_x\n");
  EXPECT_EQ(p.spec.first_line, 4);
  ASSERT_TRUE(p.device.present);
  EXPECT_EQ(p.device.text, "__global__ void k() {}\n");
  EXPECT_EQ(p.device.first_line, 6);
  ASSERT_TRUE(p.host.present);
  EXPECT_EQ(p.host.first_line, 8);
  EXPECT_EQ(p.host.text, "at::Tensor forward(const at::Tensor& x) { return x; }\n");
}

TEST(ProgramText, SectionsInAnyOrderWithCrlfAndNoFinalNewline) {
  const ProgramText p = parse_program_text("// crl:host\r\nint forward();\r\n// crl:device  \r\nvoid k() {}", "q");
  EXPECT_FALSE(p.spec.present);
  EXPECT_EQ(p.host.text, "int forward();\n");
  EXPECT_EQ(p.host.first_line, 2);
  EXPECT_EQ(p.device.text, "void k() {}\n");
  EXPECT_EQ(p.device.first_line, 4);
}

TEST(ProgramText, RenderRoundTrips) {
  const ProgramText p = parse_program_text("// crl:host\nA\n// crl:spec\nB\n", "r");
  const ProgramText again = parse_program_text(render_program_text(p), "r");
  EXPECT_EQ(again.spec.text, "B\n");
  EXPECT_EQ(again.host.text, "A\n");
  EXPECT_FALSE(again.device.present);
}

TEST(ProgramText, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("// ok\nint x;\n// crl:host\nf\n"),
            "p.crl:2: expected only blank lines and // comments before the first section marker (found 'int x;')");
  EXPECT_EQ(error_of("// crl:host\nf\n// crl:device\n\n// crl:host\ng\n"),
            "p.crl:5: expected each section marker once (found a second '// crl:host'; the first is on line 1)");
  EXPECT_EQ(error_of("// crl:host\nf\n// crl:kernels\n"),
            "p.crl:3: expected a section marker '// crl:spec', '// crl:device' or '// crl:host' (found '// crl:kernels')");
  EXPECT_EQ(error_of("// crl:spec\ntask: x\n// crl:device\nk\n"),
            "p.crl:5: expected a '// crl:host' section (found the end of the program without one)");
  EXPECT_EQ(error_of(""), "p.crl:1: expected a '// crl:host' section (found an empty program without one)");
  EXPECT_EQ(error_of("// crl:host\n  \n\n// crl:device\nk\n"),
            "p.crl:2: expected the forward function in the host section (found an empty section)");
}

TEST(ProgramText, MissingFileIsAnIoError) {
  EXPECT_THROW(load_program_file("/nonexistent/dir/x.crl"), IoError);
}


// Editors on Windows write a UTF-8 byte-order mark; before it was skipped, a marker on line 1 was
// not recognised and the error quoted the invisible bytes.
TEST(ProgramText, LeadingByteOrderMarkIsSkipped) {
  const std::string text = "// crl:host\nint forward();\n";
  const ProgramText with_bom = parse_program_text("\xEF\xBB\xBF" + text, "bom.crl");
  const ProgramText without = parse_program_text(text, "bom.crl");
  EXPECT_EQ(with_bom.host.text, without.host.text);
  EXPECT_EQ(with_bom.host.first_line, 2);
  EXPECT_EQ(error_of("\xEF\xBB\xBF// crl:host\n\n"),
            "p.crl:2: expected the forward function in the host section (found an empty section)");
  // A mark anywhere else is program text, left to the compiler.
  EXPECT_EQ(parse_program_text("// crl:host\n\xEF\xBB\xBFint f();\n", "m").host.text, "\xEF\xBB\xBFint f();\n");
}

}  // namespace
}  // namespace crl
