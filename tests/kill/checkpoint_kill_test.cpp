// The kill-at-every-write test of checkpoints (lib/policy/checkpoint.cpp): checkpoint_kill_writer
// saves three checkpoints (a new step, another, the same step again) under kill_shim, dying at each
// call that changes the checkpoint folder in turn (a write torn in half); after each death its
// `check` mode must find the newest good checkpoint the returned saves allow, load it whole, and
// save again. Figures (kill points, failures) are printed; CRL_KILL_WRITER=<a checkpoint_kill_writer
// built with another checkpoint.cpp> runs the same kills against it (tests/kill/README.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

TEST(CheckpointKill, EveryWriteOfASaveCanBeKilledAndTheNewestGoodOneIsUsed) {
  const fs::path scratch = fs::path(::testing::TempDir()) / fmt::format("crl_checkpoint_kill_{}", ::getpid());
  remove_tree(scratch);
  fs::create_directories(scratch);
  const auto run = [&](const std::string& mode, const fs::path& root, const fs::path& progress, long kill_at,
                       const fs::path& count_file) {
    CommandOptions options;
    options.timeout = std::chrono::minutes(2);
    if (kill_at >= 0) {
      options.env = {{"LD_PRELOAD", CRL_KILL_SHIM}, {"CRL_KILL_DIR", root.string()}, {"CRL_KILL_AT", std::to_string(kill_at)}};
      if (!count_file.empty()) options.env["CRL_KILL_COUNT_FILE"] = count_file.string();
    }
    const char* other = std::getenv("CRL_KILL_WRITER");
    const std::string writer = other != nullptr && *other != '\0' ? other : CRL_CHECKPOINT_KILL_WRITER;
    return run_command({writer, mode, root.string(), progress.string()}, options);
  };
  int points = 0;
  {
    const fs::path root = scratch / "count", count_file = scratch / "count.n";
    fs::create_directories(root);
    const auto r = run("save", root, scratch / "count.progress", 0, count_file);
    ASSERT_TRUE(r.ok()) << r.output;
    points = std::stoi(read_file(count_file, "kill count"));
  }
  std::vector<std::string> failures;
  for (int n = 1; n <= points; ++n) {
    const fs::path root = scratch / fmt::format("kill-{}", n), progress = scratch / fmt::format("kill-{}.progress", n);
    fs::create_directories(root);
    const auto killed = run("save", root, progress, n, "");
    if (killed.signal != SIGKILL) {
      failures.push_back(fmt::format("kill point {}: not killed (exit {}): {}", n, killed.exit_code, killed.output));
      continue;
    }
    const auto checked = run("check", root, progress, -1, "");
    if (!checked.ok()) failures.push_back(fmt::format("kill point {}: {}", n, checked.output));
  }
  std::cout << fmt::format("checkpoint kill test: {} kill points, {} failures\n", points, failures.size());
  EXPECT_GT(points, 10) << "the shim saw too few writes: is it loaded?";
  for (const auto& f : failures) ADD_FAILURE() << f;
  if (failures.empty()) remove_tree(scratch);
}

}  // namespace
}  // namespace crl
