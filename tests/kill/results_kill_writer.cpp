// The writer the kill-at-every-write test kills (results_kill_test.cpp): STEPS steps into a results
// file, each a batch of rows, a text, a replaced /meta attribute and a flag set on the step
// before's rows, then flush(); halfway it closes and reopens the file. After each completed flush
// it appends "flushed <steps done>" to PROGRESS (kept outside the folder the shim watches). Run on
// a file that holds k whole steps, it goes on at step k: the resume.
//   results_kill_writer FILE STEPS PROGRESS [automatic|exchange|link|copy|reopen]
// (reopen: automatic, and the writer reopens its shadow after every flush, as it does when
// HDF5's metadata cache passes its bound.)
// It uses ResultsWriter's public interface only, so it also builds against crl before issue 41
// (tests/kill/README.md: the "before" figures).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "results/results_writer.h"
#include "results_kill_rows.h"

#if __has_include("results/shadowed_file.h")
#define CRL_KILL_HAS_COMMIT_METHOD 1
#endif

namespace {

using namespace crl::results;

void note_progress(const std::string& progress, std::int64_t steps_done) {
  // A plain stdio append: its file is outside the watched folder, so the shim lets it through.
  FILE* f = std::fopen(progress.c_str(), "a");
  if (f == nullptr) std::exit(4);
  std::fprintf(f, "flushed %lld\n", static_cast<long long>(steps_done));
  std::fclose(f);
}

std::unique_ptr<ResultsWriter> open_writer(const std::string& path, const std::string& method) {
  ResultsWriterOptions options;
  options.chunk_rows = 4;  // a chunk fills within two steps: chunk allocation is part of what is killed
#ifdef CRL_KILL_HAS_COMMIT_METHOD
  options.commit = method == "exchange" ? CommitMethod::exchange
                   : method == "link"   ? CommitMethod::link
                   : method == "copy"   ? CommitMethod::copy
                                        : CommitMethod::automatic;
  if (method == "reopen") options.reopen_above_cache_bytes = 0;
#else
  (void)method;
#endif
  auto writer = std::make_unique<ResultsWriter>(path, options);
  writer->declare_table("rollouts", crl::kill_test::kSchema);
  return writer;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FILE STEPS PROGRESS [automatic|exchange|link|copy|reopen]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1], progress = argv[3], method = argc > 4 ? argv[4] : "automatic";
  const std::int64_t steps = std::atoll(argv[2]);
  try {
    auto writer = open_writer(path, method);
    const std::int64_t rows = writer->rows("rollouts");
    if (rows % crl::kill_test::kRowsPerStep != 0) {
      std::fprintf(stderr, "%s holds %lld rows, not whole steps\n", path.c_str(), static_cast<long long>(rows));
      return 3;
    }
    for (std::int64_t step = rows / crl::kill_test::kRowsPerStep; step < steps; ++step) {
      if (step == steps / 2 && step > 0) {  // close, then append to the file again
        writer.reset();
        writer = open_writer(path, method);
      }
      writer->append("rollouts", crl::kill_test::step_rows(step));
      writer->put_text("completions", step, crl::kill_test::completion(step));
      writer->set_meta("last_step", std::to_string(step));
      if (step > 0) {
        writer->set_flag("rollouts", "redone", (step - 1) * crl::kill_test::kRowsPerStep,
                         step * crl::kill_test::kRowsPerStep, true);
      }
      writer->flush();
      note_progress(progress, step + 1);
    }
    writer->close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "results_kill_writer: %s\n", e.what());
    return 1;
  }
  return 0;
}
