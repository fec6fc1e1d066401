// What a checkpoint of `crl run` holds beyond the policy's weights and optimiser
// (policy/checkpoint.h), and which checkpoints the job keeps:
//   - user_state in trainer_state.json: the stage and its steps, the job's counters, the crl
//     stage's reward window, the results rows the checkpoint covers, and (staleness 1) the step
//     generated but not yet judged, each trainer's share as text;
//   - every trainer's generator states as CBOR, for their gather to rank 0, which writes them all;
//   - retention: each stage's `checkpoint.keep` newest, and every stage's end (a later stage's KL
//     reference).
// Reading any of it validates it: a checkpoint that does not fit the job is an InputError naming it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "policy/safetensors.h"
#include "rl/job_config.h"
#include "rl/step_batch.h"

namespace crl::rl {

// Staleness 1: the step generated (by the policy before the last update) but not yet judged.
struct InFlightStep {
  int64_t job_step = 0, local_step = 0;
  std::vector<PlannedGroup> plan;
  std::vector<std::string> trainers;  // each trainer's share (in_flight_share_text), by trainer rank
};

// The job's part of a checkpoint (its user_state, beside the job file itself).
struct RunState {
  size_t stage = 0;            // the stage the checkpoint was written in
  int64_t stage_steps = 0;     // its steps done (sft: batches; selftrain: rounds; crl: steps)
  bool stage_done = false;     // written at the stage's end: resume with the next stage
  int64_t job_step = 0;        // the job's step counter: steps done
  int64_t policy_version = 0;  // optimiser steps done, over all stages
  nlohmann::json normalizer;   // the crl stage's reward window (null elsewhere)
  int64_t steps_rows = 0, rollouts_rows = 0;  // rows of /steps and /rollouts it covers
  int64_t validation_rows = 0;                // rows of /validation it covers (job key `validation`)
  int64_t restart = 0;         // the run that wrote it (0: the first)
  std::string stage_start;     // the checkpoint its stage started from ("" for the first stage)
  std::optional<InFlightStep> in_flight;
};

// user_state for trainer_state.json: the state and `job_config` (the job file as JSON).
nlohmann::json user_state_json(const RunState& state, const nlohmann::json& job_config);

// Where a resumed run starts: the checkpoint and what the job put in its user state.
struct ResumePoint {
  std::string dir;
  RunState state;
  // The in-flight step as stored (null: none), read per trainer by in_flight_share.
  nlohmann::json in_flight;

  // Validates user_state (InputError naming DIR/trainer_state.json when it is not a crl run's).
  static ResumePoint from_user_state(const std::string& dir, const nlohmann::json& user_state);
};

// A trainer's share of a generated step, for a checkpoint written while the step is in flight.
std::string in_flight_share_text(const GeneratedStep& step);
// Trainer `trainer_rank`'s share of the in-flight step of `resume` (of `trainers` trainers), as it
// was generated; group_prompts are left for the trainer to fill in. InputError (naming the
// checkpoint) when it is unreadable or does not fit `stage` or the run.
GeneratedStep in_flight_share(const ResumePoint& resume, const StageConfig& stage, int trainer_rank, int trainers);

// Generator states (policy::generator_states()) as CBOR bytes, for the gather to rank 0, and back;
// Error naming the trainer rank when the bytes are unreadable.
std::string generator_states_cbor(const policy::NamedTensors& states);
policy::NamedTensors generator_states_from_cbor(const std::string& bytes, int trainer_rank);

// Whether `dir` is a finished checkpoint written at a stage's end (its trainer_state.json says so);
// sets *stage to that stage.
bool is_stage_end_checkpoint(const std::filesystem::path& dir, size_t* stage = nullptr);
// The newest end-of-stage checkpoint of stage `stage` under `root` ("" when there is none).
std::string stage_end_checkpoint(const std::filesystem::path& root, size_t stage);
// Deletes the checkpoints under `root` beyond the `keep` newest finished ones (`newest`, just
// written, always counts), and unfinished ones (no DONE), but never a stage's end.
void prune_checkpoints(const std::filesystem::path& root, const std::filesystem::path& newest, int64_t keep);

}  // namespace crl::rl
