// The kill-at-every-write test of results files: results_kill_writer runs once under kill_shim to
// count the calls that change its folder (the kill points), then once per kill point N, dying by
// SIGKILL at the N-th (a write torn in half). After each death the file must open (ResultsReader,
// which validates its layout), hold exactly the rows, texts, flags and /meta of a whole number of
// flushes, at least those of the last flush that returned, and the same command must resume it to
// the end. At the end one h5py process (tools/analysis/crl_results.py) reads every killed file too.
// Figures (kill points, failures) are printed; CRL_KILL_WRITER=<a results_kill_writer built against
// another crl> runs the same kills against that writer (tests/kill/README.md).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "results/results_reader.h"
#include "results_kill_rows.h"
#include "venv_python.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
using kill_test::kRowsPerStep;

constexpr std::int64_t kSteps = 4;

std::string writer_binary() {
  const char* other = std::getenv("CRL_KILL_WRITER");
  return other != nullptr && *other != '\0' ? other : CRL_KILL_WRITER;
}

// Steps whose flush returned, from the writer's progress file.
std::int64_t steps_flushed(const fs::path& progress) {
  std::ifstream in(progress);
  std::string word;
  std::int64_t steps = 0, n = 0;
  while (in >> word >> n) steps = n;
  return steps;
}

// What a file holding `steps` whole steps must read as; "" when it does, else what differs.
std::string check_steps(const std::string& path, std::int64_t steps) {
  try {
    const results::ResultsReader reader(path);
    const auto tables = reader.tables();
    // The writer's first flush (in its constructor) commits an empty file, before the table exists.
    if (steps == 0 && std::find(tables.begin(), tables.end(), "rollouts") == tables.end()) return "";
    const auto rows = reader.rows("rollouts");
    if (rows != steps * kRowsPerStep) return fmt::format("{} rows, not {}", rows, steps * kRowsPerStep);
    const auto ids = reader.column_as<std::int64_t>("rollouts", "rollout");
    const auto speedups = reader.column_as<double>("rollouts", "speedup");
    const auto oks = reader.column_as<bool>("rollouts", "ok");
    const auto programs = reader.column_as<std::string>("rollouts", "program");
    const auto redone = reader.column_as<bool>("rollouts", "redone");
    for (std::int64_t id = 0; id < rows; ++id) {
      const auto i = static_cast<std::size_t>(id);
      const bool flagged = id < (steps - 1) * kRowsPerStep;  // every step but the last was flagged by the next
      if (ids[i] != id || speedups[i] != 0.5 * static_cast<double>(id) || oks[i] != (id % 2 == 0) ||
          programs[i] != kill_test::program(id) || redone[i] != flagged) {
        return fmt::format("row {} differs", id);
      }
    }
    const auto texts = reader.texts("completions");
    if (static_cast<std::int64_t>(texts.size()) != steps) return fmt::format("{} completions, not {}", texts.size(), steps);
    for (std::int64_t s = 0; s < steps; ++s) {
      const auto it = texts.find(s);
      if (it == texts.end() || it->second != kill_test::completion(s)) return fmt::format("completion {} differs", s);
    }
    const std::string last = steps > 0 ? reader.meta("last_step") : "";
    if (steps > 0 && last != std::to_string(steps - 1)) return fmt::format("/meta last_step is {}", last);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

// check_steps in a child process with a time bound: HDF5 can loop forever on a torn file (it did on
// the writer before issue 41, in H5HG_read of a torn global heap), and that is a failure to count,
// not a test that never ends.
std::string check_steps_bounded(const std::string& path, std::int64_t steps) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    ::alarm(30);
    const std::string verdict = check_steps(path, steps);
    const std::string out = verdict.empty() ? "ok" : verdict;
    [[maybe_unused]] const auto n = ::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) {
    return WTERMSIG(status) == SIGALRM ? "reading it hangs (still reading after 30 s)"
                                       : fmt::format("reading it kills the reader (signal {})", WTERMSIG(status));
  }
  return out == "ok" ? "" : out;
}

struct KillFigures {
  int points = 0;
  int failed_points = 0;                // kill points with at least one failed check
  std::vector<std::string> failures;    // every failed check
};

KillFigures kill_at_every_write(const std::string& method, const fs::path& scratch) {
  KillFigures figures;
  const fs::path shim = CRL_KILL_SHIM;
  const fs::path kept = scratch / "killed";  // each killed file, for the h5py check
  fs::create_directories(kept);
  nlohmann::json manifest = nlohmann::json::array();
  const auto run = [&](const fs::path& dir, const fs::path& progress, long kill_at, const fs::path& count_file) {
    CommandOptions options;
    options.timeout = std::chrono::seconds(30);  // a writer that hangs (HDF5 on a torn file) is a failure
    if (kill_at >= 0) {
      options.env = {{"LD_PRELOAD", shim.string()},
                     {"CRL_KILL_DIR", dir.string()},
                     {"CRL_KILL_AT", std::to_string(kill_at)}};
      if (!count_file.empty()) options.env["CRL_KILL_COUNT_FILE"] = count_file.string();
    }
    return run_command({writer_binary(), (dir / "run.h5").string(), std::to_string(kSteps), progress.string(), method},
                       options);
  };
  // Count the kill points: a run that never dies (kill point 0).
  {
    const fs::path dir = scratch / "count", progress = scratch / "count.progress", count_file = scratch / "count.n";
    fs::create_directories(dir);
    const auto r = run(dir, progress, 0, count_file);
    if (!r.ok()) {
      figures.failures.push_back("the writer fails without any kill: " + r.output);
      return figures;
    }
    figures.points = std::stoi(read_file(count_file, "kill count"));
    const std::string whole = check_steps((dir / "run.h5").string(), kSteps);
    if (!whole.empty()) figures.failures.push_back("the writer's own file is wrong: " + whole);
  }
  for (int n = 1; n <= figures.points; ++n) {
    const fs::path dir = scratch / fmt::format("kill-{}", n), progress = scratch / fmt::format("kill-{}.progress", n);
    fs::create_directories(dir);
    const std::size_t failures_before = figures.failures.size();
    struct CountFailedPoint {
      KillFigures& figures;
      std::size_t before;
      ~CountFailedPoint() { figures.failed_points += figures.failures.size() > before ? 1 : 0; }
    } count_failed_point{figures, failures_before};
    const auto r = run(dir, progress, n, "");
    const std::string where = fmt::format("kill point {}", n);
    if (r.signal != SIGKILL) {
      figures.failures.push_back(fmt::format("{}: the writer was not killed (exit {}): {}", where, r.exit_code, r.output));
      continue;
    }
    const std::int64_t flushed = steps_flushed(progress);
    const std::string path = (dir / "run.h5").string();
    if (!fs::exists(path)) {
      // Nothing is promised before the first flush returns.
      if (flushed > 0) figures.failures.push_back(fmt::format("{} (after {} flushes): the file is gone", where, flushed));
    } else {
      // The flushes that returned, or one more when the kill hit after its commit.
      const std::string as_flushed = check_steps_bounded(path, flushed);
      const std::string one_more = as_flushed.empty() ? "" : check_steps_bounded(path, flushed + 1);
      if (!as_flushed.empty() && !one_more.empty()) {
        figures.failures.push_back(fmt::format("{} (after {} flushes): {}", where, flushed, as_flushed));
      } else {
        const fs::path copy = kept / fmt::format("{}.h5", n);
        fs::copy_file(path, copy);
        manifest.push_back({{"file", copy.string()}, {"rows", (as_flushed.empty() ? flushed : flushed + 1) * kRowsPerStep}});
      }
    }
    // The same command resumes: all steps, each once.
    const auto resumed = run(dir, progress, -1, "");
    if (!resumed.ok()) {
      figures.failures.push_back(fmt::format("{} (after {} flushes): resuming failed: {}", where, flushed, resumed.output));
    } else if (const std::string whole = check_steps_bounded(path, kSteps); !whole.empty()) {
      figures.failures.push_back(fmt::format("{} (after {} flushes): after resuming: {}", where, flushed, whole));
    }
  }
  // h5py and the analysis loader read every killed file (one process for all of them).
  const std::string python = crl::testing::venv_python();
  if (fs::exists(python) && !manifest.empty()) {
    const fs::path manifest_file = scratch / "manifest.json";
    std::ofstream(manifest_file) << manifest.dump();
    const auto r = run_command({python, fs::path(CRL_SOURCE_DIR) / "tests/kill/check_killed_files.py", manifest_file.string()},
                               {.timeout = std::chrono::minutes(5)});
    if (!r.ok()) figures.failures.push_back("h5py / crl_results.py: " + r.output);
  }
  return figures;
}

class ResultsKill : public ::testing::TestWithParam<std::string> {};

TEST_P(ResultsKill, EveryWriteOfEveryFlushCanBeKilledAndTheFileResumes) {
  const fs::path scratch = fs::path(::testing::TempDir()) / fmt::format("crl_results_kill_{}_{}", GetParam(), ::getpid());
  remove_tree(scratch);
  fs::create_directories(scratch);
  const KillFigures figures = kill_at_every_write(GetParam(), scratch);
  std::cout << fmt::format("results kill test ({}, commit {}): {} kill points, {} failed ({} failed checks)\n",
                           writer_binary(), GetParam(), figures.points, figures.failed_points, figures.failures.size());
  EXPECT_GT(figures.points, 4 * kSteps) << "the shim saw too few writes: is it loaded?";
  for (const auto& f : figures.failures) ADD_FAILURE() << f;
  if (figures.failures.empty()) remove_tree(scratch);
}

// automatic takes renameat2(RENAME_EXCHANGE) where the test folder's file system has it; link and
// copy are the fallbacks for file systems without (NFS, Lustre; no hard links); reopen is automatic
// with the writer reopening its shadow after every flush (its metadata cache bound at 0).
INSTANTIATE_TEST_SUITE_P(Commit, ResultsKill, ::testing::Values("automatic", "link", "copy", "reopen"));

}  // namespace
}  // namespace crl
