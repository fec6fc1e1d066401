// `crl [SUBCOMMAND...] --help` as a user types it (issue 43, item 7): build/apps/crl/crl answers from
// the pages crl-main wrote at build time, without starting crl-main and its LibTorch, and every page
// is crl-main's own answer byte for byte; other forms still go to crl-main.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

CommandResult run(const std::string& exe, std::vector<std::string> args) {
  args.insert(args.begin(), exe);
  return run_command(args, {.timeout = std::chrono::seconds(60)});
}

// The subcommands a help text lists under "Subcommands:".
std::vector<std::string> subcommands_listed(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "Subcommands:") {
      inside = true;
    } else if (inside && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (inside) {
      inside = false;
    }
  }
  return out;
}

// A subcommand path ({}, {"doctor"}, ..., {"tasks", "list"}) and crl-main's answer to its --help.
struct HelpPage {
  std::vector<std::string> path;
  std::string main_output;
};

// Every subcommand path, found from crl-main's own help, with that help (crl-main starts once per
// page: each start loads LibTorch, ~0.7 s).
void every_path(std::vector<std::string>& path, std::vector<HelpPage>& out) {
  std::vector<std::string> args = path;
  args.push_back("--help");
  const CommandResult r = run(CRL_EXE, args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  out.push_back({path, r.output});
  for (const std::string& sub : subcommands_listed(r.output)) {
    path.push_back(sub);
    every_path(path, out);
    path.pop_back();
  }
}

TEST(HelpCli, EveryPageIsCrlMainsOwnAnswer) {
  std::vector<std::string> path;
  std::vector<HelpPage> pages;
  every_path(path, pages);
  ASSERT_GE(pages.size(), 10u) << "crl-main's help lists too few subcommands";
  for (const HelpPage& p : pages) {
    std::string page = std::string(CRL_FRONT_EXE) + "-help/crl";
    for (const auto& part : p.path) page += "." + part;
    EXPECT_TRUE(fs::is_regular_file(page)) << page << " was not written at build time";
    for (const char* flag : {"--help", "-h"}) {
      std::vector<std::string> args = p.path;
      args.push_back(flag);
      const CommandResult front = run(CRL_FRONT_EXE, args);
      EXPECT_EQ(front.exit_code, 0) << front.output;
      EXPECT_EQ(front.output, p.main_output) << "crl " << fmt::format("{}", fmt::join(args, " "));
    }
  }
}

// A copy of crl and its pages with no crl-main beside it: help needs nothing else (so no LibTorch
// was loaded), and any other command shows that there is nothing else to start.
class HelpWithoutCrlMain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("crl_help_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(), ::getpid());
    remove_tree(dir_);
    fs::create_directories(dir_);
    fs::copy_file(CRL_FRONT_EXE, dir_ / "crl");
    fs::copy(std::string(CRL_FRONT_EXE) + "-help", dir_ / "crl-help");
  }
  void TearDown() override { remove_tree(dir_); }
  std::string crl() const { return (dir_ / "crl").string(); }
  fs::path dir_;
};

TEST_F(HelpWithoutCrlMain, HelpIsAnsweredFromThePages) {
  for (const std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"-h"}, {"tasks", "list", "--help"}, {"init-model", "-h"}}) {
    const CommandResult front = run(crl(), args);
    EXPECT_EQ(front.exit_code, 0) << front.output;
    EXPECT_EQ(front.output, run(CRL_EXE, args).output) << fmt::format("{}", fmt::join(args, " "));
  }
  const CommandResult r = run(crl(), {"doctor"});
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("crl-main"), std::string::npos) << r.output;
}

TEST_F(HelpWithoutCrlMain, OtherFormsGoToCrlMain) {
  // Options before --help, a name with no page, an argument that is no subcommand name: crl-main's to
  // answer (here: missing, so the exec fails, naming it).
  for (const std::vector<std::string> args : {std::vector<std::string>{"--log-level", "warn", "--help"}, {"nosuch", "--help"},
                                              {"eval", "cand.crl", "--help"}, {"tasks", "list", "--help", "--json"}}) {
    const CommandResult r = run(crl(), args);
    EXPECT_EQ(r.exit_code, 4) << fmt::format("{}", fmt::join(args, " ")) << ": " << r.output;
    EXPECT_NE(r.output.find("crl-main"), std::string::npos) << r.output;
  }
}

TEST(HelpCli, FormsWithoutAPageAreAnsweredByCrlMain) {
  for (const std::vector<std::string> args : {std::vector<std::string>{"--log-level", "warn", "--help"}, {"nosuch", "--help"}}) {
    const CommandResult front = run(CRL_FRONT_EXE, args);
    const CommandResult main = run(CRL_EXE, args);
    EXPECT_EQ(front.exit_code, main.exit_code) << front.output;
    EXPECT_EQ(front.output, main.output);
  }
}

}  // namespace
}  // namespace crl
