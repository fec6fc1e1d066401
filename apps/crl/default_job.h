// `crl run` with no job file: the built-in default job (jobs/default.yaml) on this machine, small.
// It makes the tiny model (crl init-model's library call) unless the run folder has one, starts
// itself under mpirun, then runs `crl report` on the results and prints where the page is.
// And `--set KEY=VALUE` overrides of any job file (the CI test shortens the default with them).
#pragma once

#include <string>
#include <vector>

namespace crl::cli {

struct DefaultRunOptions {
  std::string run_dir = "results/default";  // model/, results.h5, checkpoints/, report/
  int ranks = 2;                            // MPI ranks: 1 trainer, the rest evaluate
  std::vector<std::string> overrides;       // --set KEY=VALUE, passed on to the job
  std::string model;                        // --model: start from this checkpoint instead of a tiny new one
};

// The default job file: the source tree's jobs/default.yaml.
std::string default_job_path();

// Runs the default job as described above; returns crl's exit code (5 when stopped, resumable).
// `self` is this executable's path (for mpirun and crl report).
int run_default_job(const DefaultRunOptions& options, const std::string& self);

// A job file's text with `KEY=VALUE` overrides applied. KEY is a path into the YAML as the job
// file's messages print it (`stages[2].steps`, `eval.time_budget`) or dotted (`stages.2.steps`),
// VALUE is YAML (`6`, `[1, 2]`). The key's parent must exist; throws InputError naming the
// override and the key (in the first form) otherwise.
std::string apply_job_overrides(const std::string& text, const std::string& origin, const std::vector<std::string>& overrides);

}  // namespace crl::cli
