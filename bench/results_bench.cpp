// Benchmarks of results files: one RL step (512 rollout rows + 512 program texts of 2 KiB,
// then flush) through ResultsWriter, against write() of the same bytes to a plain file (the
// ceiling). Run: build/bench/bench_results   (files go to $TMPDIR, or /tmp)
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "results/results_writer.h"

namespace {

constexpr std::int64_t kRolloutsPerStep = 512;
constexpr std::size_t kProgramBytes = 2048;
const crl::results::TableSchema kRollouts = {{"rollout", crl::results::ColumnType::int64},
                                             {"task", crl::results::ColumnType::string},
                                             {"speedup", crl::results::ColumnType::float64},
                                             {"correct", crl::results::ColumnType::boolean},
                                             {"reference_ms", crl::results::ColumnType::float64},
                                             {"candidate_ms", crl::results::ColumnType::float64}};
// Bytes of one step's payload: numbers (8+8+1+8+8), task names (~24), programs and their ids.
constexpr std::int64_t kStepBytes = kRolloutsPerStep * (33 + 24 + kProgramBytes + 8);

std::string scratch_path(const char* name) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".lock");
  return path.string();
}

void BM_ResultsWriterStep(benchmark::State& state) {
  const bool fsync = state.range(0) != 0;
  const auto cache_bound = static_cast<std::size_t>(state.range(1)) << 20;
  const auto commit = static_cast<crl::results::CommitMethod>(state.range(2));
  const auto path = scratch_path("crl_bench_results.h5");
  std::size_t largest_cache = 0;
  {
    crl::results::ResultsWriter writer(
        path,
        {.chunk_rows = 1024, .fsync_on_flush = fsync, .reopen_above_cache_bytes = cache_bound, .commit = commit});
    writer.declare_table("rollouts", kRollouts);
    const std::string program(kProgramBytes, 'p');
    std::int64_t next_id = 0;
    for (auto _ : state) {
      crl::results::RowBatch batch(kRollouts);
      std::vector<std::int64_t> ids;
      std::vector<std::string> programs;
      for (std::int64_t i = 0; i < kRolloutsPerStep; ++i, ++next_id) {
        batch.add_row({next_id, std::string("level2/gemm_relu_bias_24"), 1.5, true, 0.25, 0.125});
        ids.push_back(next_id);
        programs.push_back(program);
      }
      writer.append("rollouts", batch);
      writer.put_texts("programs", ids, programs);
      writer.flush();
      largest_cache = std::max(largest_cache, writer.metadata_cache_bytes());
    }
  }
  state.SetItemsProcessed(state.iterations() * kRolloutsPerStep);
  state.SetBytesProcessed(state.iterations() * kStepBytes);
  state.counters["cache_MiB"] = static_cast<double>(largest_cache) / (1024.0 * 1024.0);
  state.counters["file_MiB"] =
      static_cast<double>(std::filesystem::file_size(path)) / (1024.0 * 1024.0);
  std::filesystem::remove(path);
}
// Args: fsync on flush, metadata cache bound in MiB (16 is the default; 0 reopens at every flush),
// commit method (0 automatic: exchange here; 2 the hard-link sequence; 3 a whole copy per flush,
// what file systems without hard links get).
BENCHMARK(BM_ResultsWriterStep)
    ->ArgNames({"fsync", "cache_bound_MiB", "commit"})
    ->Args({0, 16, 0})
    ->Args({1, 16, 0})
    ->Args({0, 0, 0})
    ->Args({0, 64, 0})
    ->Args({0, 16, 2})
    ->Args({0, 16, 3})
    ->Iterations(100)
    ->UseRealTime();

void BM_PlainFileWriteStep(benchmark::State& state) {
  const bool fsync = state.range(0) != 0;
  const auto path = scratch_path("crl_bench_plain.bin");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::string step(static_cast<std::size_t>(kStepBytes), 'p');
  for (auto _ : state) {
    if (::write(fd, step.data(), step.size()) != static_cast<ssize_t>(step.size())) {
      state.SkipWithError("write failed");
      break;
    }
    if (fsync) ::fsync(fd);
  }
  ::close(fd);
  state.SetItemsProcessed(state.iterations() * kRolloutsPerStep);
  state.SetBytesProcessed(state.iterations() * kStepBytes);
  std::filesystem::remove(path);
}
BENCHMARK(BM_PlainFileWriteStep)->ArgName("fsync")->Arg(0)->Arg(1)->Iterations(100)->UseRealTime();

}  // namespace
