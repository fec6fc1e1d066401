// `crl eval`'s human output (no --json) says why each failed verdict failed, under the table: the
// compiler's first lines pointing at the .crl line, a mismatch's worst element whole, the guard
// that fired and what it saw (issue 43, item 3).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "core/subprocess.h"
#include "eval/scratch_dir.h"
#include "shared_test_cache.h"

namespace crl::eval {
namespace {

const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/eval";
const std::string kCache = crl::testing::shared_test_cache_dir();

// The lines under `heading` in the "why:" part (each indented by four spaces), unindented.
std::string reasons_of(const std::string& output, const std::string& heading) {
  const auto why = output.find("\nwhy:\n");
  if (why == std::string::npos) {
    ADD_FAILURE() << "no why: part in\n" << output;
    return "";
  }
  std::istringstream in(output.substr(why));
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == heading) {
      inside = true;
    } else if (inside) {
      if (line.rfind("    ", 0) != 0) break;
      block += line.substr(4) + "\n";
    }
  }
  EXPECT_TRUE(inside) << "no '" << heading << "' in\n" << output;
  return block;
}

TEST(EvalWhyCli, EachFailedVerdictSaysWhyUnderTheTable) {
  ScratchDir dir("crl_eval_why_test_");
  const std::string compile_error = dir.file("undeclared.crl"), mismatch = dir.file("abs.crl");
  std::ofstream(compile_error) << "// crl:host\nat::Tensor forward(const at::Tensor& x) {\n  return at::relu(x) + no_such_thing;\n}\n";
  std::ofstream(mismatch) << "// crl:host\nat::Tensor forward(const at::Tensor& x) { return x.abs() + 1.25; }\n";
  const std::string hack = kFixtures + "/hacks/timer_tampering.hack.cpu.crl";
  const std::string ok = kFixtures + "/relu/same_as_reference.crl";
  CommandOptions options;
  options.env["CRL_WORKER"] = CRL_WORKER_EXE;
  const auto r = run_command({CRL_EXE, "eval", "--suite", kFixtures + "/suite", "--backend", "cpu", "--trials", "2", "--no-timing",
                              "--cache-dir", kCache, "--task", "level1/019_relu", compile_error, mismatch, hack, ok},
                             options);
  ASSERT_EQ(r.exit_code, 1) << r.output;

  // The compiler's own words, at the .crl file's line 3 (the host section's second line).
  const std::string compiled = reasons_of(r.output, compile_error + " (level1/019_relu): compile_error");
  EXPECT_NE(compiled.find(compile_error + ":3:"), std::string::npos) << compiled;
  EXPECT_NE(compiled.find("no_such_thing"), std::string::npos) << compiled;

  // The worst element whole: every number in it as the JSON verdict has it, none cut.
  const std::string mismatched = reasons_of(r.output, mismatch + " (level1/019_relu): mismatch");
  const std::regex worst(R"(worst at flat index \d+: got -?[0-9.e+-]+, expected -?[0-9.e+-]+( \(float64\))?\n)");
  EXPECT_TRUE(std::regex_search(mismatched, worst)) << mismatched;
  EXPECT_NE(mismatched.find("elements outside atol"), std::string::npos) << mismatched;

  // The guard that fired, and what it saw.
  const std::string hacked = reasons_of(r.output, hack + " (level1/019_relu): hack:timer_tampering");
  EXPECT_NE(hacked.find("the timer_tampering guard fired at check 'guard: symbols', which saw: defines clock_gettime"),
            std::string::npos)
      << hacked;

  // An ok verdict needs no reason.
  EXPECT_EQ(r.output.find("\n" + ok + " (level1/019_relu)"), std::string::npos) << r.output;
  // The table's column is cut where a word ends (the whole message is under the table): the last
  // word before " ..." is a word of the message, followed there by a space.
  const auto row = r.output.find(mismatch + " ");
  ASSERT_NE(row, std::string::npos);
  const std::string table_row = r.output.substr(row, r.output.find('\n', row) - row);
  ASSERT_EQ(table_row.substr(table_row.size() - 4), " ...") << table_row;
  const std::string before = table_row.substr(0, table_row.size() - 4);
  const std::string last_word = before.substr(before.rfind(' ') + 1);
  EXPECT_NE(mismatched.find(" " + last_word + " "), std::string::npos) << last_word << " in " << mismatched;
}

}  // namespace
}  // namespace crl::eval
