// Tests that a writer killed without closing loses nothing it flushed: a forked child appends,
// flushes, appends more without flushing, and dies; the parent then reads and appends. (Kills in
// the middle of a flush, at every write: tests/kill.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "results_test_util.h"

namespace crl::results {
namespace {

using testing::ScratchDir;

const TableSchema kSchema = {{"rollout", ColumnType::int64},
                             {"speedup", ColumnType::float64},
                             {"ok", ColumnType::boolean},
                             {"program", ColumnType::string}};
constexpr std::int64_t kRowsPerStep = 100;

RowBatch step_rows(std::int64_t step) {
  RowBatch batch(kSchema);
  for (std::int64_t i = 0; i < kRowsPerStep; ++i) {
    const auto id = step * kRowsPerStep + i;
    batch.add_row(
        {id, 1.0 + static_cast<double>(id) / 1000.0, id % 3 == 0, fmt::format("program {} ✓", id)});
  }
  return batch;
}

enum class Death { exit_without_close, sigkill };

// In the child: `flushed_steps` flushed steps, then a step in flight (appended, not flushed:
// one ordinary step, or `big_in_flight_rows` rows of 200-byte strings), then death.
void write_then_die(const std::string& path, int flushed_steps, Death death,
                    std::int64_t big_in_flight_rows = 0,
                    std::size_t reopen_above_cache_bytes = std::size_t{16} << 20,
                    CommitMethod commit = CommitMethod::automatic) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      ResultsWriter writer(
          path, {.chunk_rows = 64, .reopen_above_cache_bytes = reopen_above_cache_bytes, .commit = commit});
      writer.declare_table("rollouts", kSchema);
      writer.set_meta("git_commit", "feedbeef");
      const auto first = writer.rows("rollouts") / kRowsPerStep;
      for (std::int64_t step = first; step < first + flushed_steps; ++step) {
        writer.append("rollouts", step_rows(step));
        writer.put_text("completions", step, fmt::format("completion of step {}", step));
        writer.flush();
      }
      if (big_in_flight_rows == 0) {
        writer.append("rollouts", step_rows(first + flushed_steps));
      } else {
        RowBatch big(kSchema);
        for (std::int64_t i = 0; i < big_in_flight_rows; ++i) {
          big.add_row({-i, 0.0, false, std::string(200, 'x')});
        }
        writer.append("rollouts", big);
      }
      writer.put_text("completions", first + flushed_steps, "in flight");
      // Die with the writer still in scope: no destructor, no H5Fclose, as if the job were killed.
      if (death == Death::sigkill) ::kill(::getpid(), SIGKILL);
      ::_exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child failed: %s\n", e.what());
      code = 2;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  if (death == Death::sigkill) {
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  } else {
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
}

void expect_steps(const std::string& path, std::int64_t steps) {
  const ResultsReader reader(path);
  ASSERT_EQ(reader.rows("rollouts"), steps * kRowsPerStep);
  const auto ids = std::get<std::vector<std::int64_t>>(reader.column("rollouts", "rollout"));
  const auto speedups = std::get<std::vector<double>>(reader.column("rollouts", "speedup"));
  const auto oks = std::get<std::vector<bool>>(reader.column("rollouts", "ok"));
  const auto programs = std::get<std::vector<std::string>>(reader.column("rollouts", "program"));
  for (std::int64_t id = 0; id < steps * kRowsPerStep; ++id) {
    const auto i = static_cast<std::size_t>(id);
    ASSERT_EQ(ids[i], id);
    ASSERT_EQ(speedups[i], 1.0 + static_cast<double>(id) / 1000.0);
    ASSERT_EQ(oks[i], id % 3 == 0);
    ASSERT_EQ(programs[i], fmt::format("program {} ✓", id));
  }
  EXPECT_EQ(reader.text("completions", steps - 1), fmt::format("completion of step {}", steps - 1));
  EXPECT_EQ(reader.text("completions", steps), std::nullopt);  // the step in flight is lost
  EXPECT_EQ(reader.meta("git_commit"), "feedbeef");
}

TEST(ResultsCrash, FlushedRowsSurviveAWriterThatExitsWithoutClosing) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  write_then_die(path, 3, Death::exit_without_close);
  expect_steps(path, 3);
}

TEST(ResultsCrash, AKilledJobResumesAppendingAfterItsLastFlush) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  write_then_die(path, 2, Death::sigkill);
  expect_steps(path, 2);
  // The kernel dropped the dead writer's lock; a resumed job appends after the flushed rows,
  // past the dead writer's shadow. This one reopens the file at every flush (cache bound 0) and
  // commits by the hard-link sequence, and dies just the same.
  write_then_die(path, 2, Death::sigkill, 0, 0, CommitMethod::link);
  expect_steps(path, 4);
}

// HDF5 by default evicts dirty metadata from its cache whenever the cache fills: a step in
// flight larger than the cache then writes B-tree nodes that point past the last flushed end
// of file. Written in place, the flushed rows could no longer be read ("addr overflow");
// ResultsWriter's HDF5 writes only the shadow (and without evictions, so the shadow too is
// still between commits).
TEST(ResultsCrash, AStepInFlightLargerThanTheMetadataCacheLeavesFlushedRowsReadable) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  write_then_die(path, 3, Death::exit_without_close, 100000);
  expect_steps(path, 3);
}

// A flush that fails part-way (here: the file size limit stops the shadow's writes, as a full disk
// would) leaves the file at the last flush that completed, and neither a later flush nor the
// writer's close commits the half-written shadow.
TEST(ResultsCrash, AFlushThatFailsNeverReachesTheFile) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing
      ResultsWriter writer(path, {.chunk_rows = 64, .fsync_on_flush = false});
      writer.declare_table("rollouts", kSchema);
      writer.set_meta("git_commit", "feedbeef");
      for (std::int64_t step = 0; step < 2; ++step) {
        writer.append("rollouts", step_rows(step));
        writer.put_text("completions", step, fmt::format("completion of step {}", step));
        writer.flush();
      }
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(std::filesystem::file_size(path) + 4096);
      ::setrlimit(RLIMIT_FSIZE, &limit);
      RowBatch big(kSchema);
      for (std::int64_t i = 0; i < 20000; ++i) big.add_row({-i, 0.0, false, std::string(200, 'x')});
      writer.append("rollouts", big);
      bool failed = false;
      try {
        writer.flush();
      } catch (const Error&) {
        failed = true;
      }
      if (!failed) ::_exit(3);
      try {
        writer.flush();
        ::_exit(4);  // a second flush must refuse, not commit what the first left
      } catch (const Error&) {
      }
      // The writer's destructor closes it: that must not commit the shadow either.
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child failed: %s\n", e.what());
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  expect_steps(path, 2);
}

}  // namespace
}  // namespace crl::results
