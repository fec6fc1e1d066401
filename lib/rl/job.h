// The crl job (`crl run JOB.yaml`): MPI ranks split into trainers (0..T-1) and evaluators (T..),
// the stages of the job file run in order (sft, selftrain, crl: one machinery), rank 0
// coordinating (prompts and exemplars, dispatch of programs to the evaluators, reward shaping,
// the one results file, checkpoints). Data flow and tables: docs/results-format.md, jobs/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "rl/job_config.h"

namespace crl::rl {

struct RunOptions {
  std::string run_dir;  // results.h5 and checkpoints/ go here; empty: runs/<job name>
};

// Runs the job on every rank of MPI_COMM_WORLD (MPI must be initialised, with MPI_ERRORS_RETURN).
// Collective: every rank calls it with the same job. Throws InputError when the job does not fit
// the world (trainer count, missing evaluators, unknown tasks) and Error for crl's own failures.
void run_job(const JobConfig& job, const RunOptions& options);

}  // namespace crl::rl
