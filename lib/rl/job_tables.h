// The results tables the job writes, /steps and /rollouts (docs/results-format.md): their schemas
// and one struct per row, so the writer, the exemplar database's rebuild and the tests share
// one definition of every column.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "results/table_schema.h"

namespace crl::rl {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

struct StepRow {
  int64_t step = 0;  // the job's step counter, over all stages
  std::string stage;
  int64_t policy_version = 0;  // optimiser steps done when the step's rollouts were generated
  double loss = 0, grad_norm = 0, lr = 0;
  bool skipped = false;        // no update (no loss tokens, or a non-finite gradient)
  double reward_mean = 0, reward_median = 0, reward_max = 0;
  int64_t n_ok = 0, n_compile_error = 0, n_runtime_error = 0, n_timeout = 0, n_crash = 0, n_mismatch = 0, n_hack = 0,
          n_format_error = 0, n_internal_error = 0;
  int64_t tokens_generated = 0, tokens_trained = 0;
  double seconds_generate = 0, seconds_evaluate = 0, seconds_train = 0;
  double evaluator_busy_fraction = 0;  // evaluators' busy seconds / (evaluators x evaluation wall time)
  double trainer_wait_seconds = 0;     // trainers' time waiting for verdicts (summed over trainers)
  double seconds_step = 0;             // rank 0's wall time since the previous step's row (or the stage's start)
  int64_t restart = 0;                 // 0 for the first run, +1 per resume
  bool superseded = false;             // a resume re-did this step (set on the row when it resumes)
  // Telemetry (steps_telemetry_columns(); NaN where not measured, and in rows of older files).
  double entropy = kNotMeasured, kl = kNotMeasured, clip_fraction = kNotMeasured;  // UpdateStats'
  double completion_tokens_mean = kNotMeasured, completion_tokens_max = kNotMeasured;
  double advantage_mean = kNotMeasured, advantage_std = kNotMeasured;
  double zero_advantage_fraction = kNotMeasured;  // share of groups whose counted rewards are all equal
};

struct RolloutRow {
  int64_t rollout_id = 0;
  int64_t step = 0;
  std::string stage;
  std::string task;
  int64_t group = 0;   // index of the prompt in the step
  int64_t sample = 0;  // index of the completion in its group
  std::string status;  // the verdict's status_text ("ok", "hack:aliasing", "format_error", ...)
  double speedup = 0, speedup_ci_low = 0, speedup_ci_high = 0;
  double speedup_ci_half_width = 0;  // the interval's half width relative to the speedup (0 when not timed)
  double candidate_median_us = 0, reference_median_us = 0;  // the timed calls' medians (0 when not timed)
  std::string scale;   // the evaluation's input scale ("small" or "full"), for the roofline
  double reward = 0, normalized_reward = 0, advantage = 0;
  int64_t completion_tokens = 0;
  int64_t evaluator_rank = -1;  // world rank of the evaluator (-1: not evaluated, or a reused verdict)
  std::string exemplar_ids;     // comma-separated rollout ids shown in the prompt
  int64_t policy_version = 0;
  int64_t restart = 0;
  bool superseded = false;
};

// /steps' columns; the last of them are steps_telemetry_columns(), which files written by an older
// crl lack (float64, NaN where not measured): a resumed run adds them to such a file's table, its
// earlier rows reading NaN.
const results::TableSchema& steps_schema();
const results::TableSchema& steps_telemetry_columns();
const results::TableSchema& rollouts_schema();

results::RowBatch step_rows(const std::vector<StepRow>& rows);
results::RowBatch rollout_rows(const std::vector<RolloutRow>& rows);

}  // namespace crl::rl
