// The kill-at-every-write test of checkpoints (lib/policy/checkpoint.cpp): checkpoint_kill_writer
// saves three checkpoints (a new step, another, the same step again) under kill_shim, dying at each
// call that changes the checkpoint folder in turn (a write torn in half); after each death its
// `check` mode must find the newest good checkpoint the returned saves allow, load it whole, and
// save again. The writer's `kill-each` mode runs every kill point in one process (a forked child
// per save and per check). Figures (kill points, failures) are printed; CRL_KILL_WRITER=<a checkpoint_kill_writer
// built with another checkpoint.cpp> runs the same kills against it (tests/kill/README.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointKill, EveryWriteOfASaveCanBeKilledAndTheNewestGoodOneIsUsed) {
  const fs::path scratch = fs::path(::testing::TempDir()) / fmt::format("crl_checkpoint_kill_{}", ::getpid());
  remove_tree(scratch);
  const fs::path kill_dir = scratch / "roots";
  fs::create_directories(kill_dir);
  const char* other = std::getenv("CRL_KILL_WRITER");
  const std::string writer = other != nullptr && *other != '\0' ? other : CRL_CHECKPOINT_KILL_WRITER;
  CommandOptions options;
  options.timeout = std::chrono::minutes(15);
  options.env = {{"LD_PRELOAD", CRL_KILL_SHIM}, {"CRL_KILL_DIR", kill_dir.string()}};
  const auto r = run_command({writer, "kill-each", kill_dir.string(), (scratch / "work").string()}, options);
  // The writer's report: "kill points N", a "kill point <n>: why" line per failure, "failures F".
  long points = -1, failures = -1;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("kill points ", 0) == 0) points = std::stol(line.substr(12));
    if (line.rfind("failures ", 0) == 0) failures = std::stol(line.substr(9));
    if (line.rfind("kill point ", 0) == 0 && line.rfind("kill points ", 0) != 0) ADD_FAILURE() << line;
  }
  std::cout << fmt::format("checkpoint kill test: {} kill points, {} failures\n", points, failures);
  EXPECT_GT(points, 10) << "the shim saw too few writes: is it loaded?\n" << r.output;
  EXPECT_EQ(failures, 0) << r.output;
  EXPECT_TRUE(r.ok()) << r.output;
  if (r.ok()) remove_tree(scratch);
}

}  // namespace
}  // namespace crl
