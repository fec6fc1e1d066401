// One step of a generating stage (selftrain, crl) as data: the plan every trainer generates from,
// one record per rollout that each stage of the step fills in (step.h), the batch rank 0 judges and
// records, and the outcome every trainer updates from. The messages between the trainers are these
// types as JSON (to_json/from_json below, read strictly).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "eval/verdict.h"

namespace crl::rl {

// One prompt of a step: G rollouts are generated from it.
struct PlannedGroup {
  std::string task;
  std::string prompt;
  std::string exemplar_ids;  // the rollout ids of the exemplars it shows, "3,17" (exemplar_db.h's join_ids)
};

// What rank 0 decides before a step is generated; every trainer gets it (broadcast).
struct StepPlan {
  int64_t job_step = 0;
  std::vector<PlannedGroup> groups;  // the stage's `batch` of them; group g's rollouts are g*G .. g*G+G-1
};

// One rollout, as the step's stages fill it in.
struct RolloutRecord {
  // generate_rollouts (on the trainer that generated it)
  int64_t group = 0, sample = 0;
  std::string completion;          // the text
  int64_t completion_tokens = 0;   // its token count (what the update trains on)
  std::vector<int64_t> tokens;     // the generating trainer only: the token ids the update trains on
  std::vector<float> logp;         // the generating trainer only: the generating policy's, per token (empty: planted)
  // collect (rank 0)
  int64_t id = -1;                 // the rollout id: the results file's key
  std::string task;
  // extract_programs
  std::string program;             // the completion's program block ("" when it has none)
  bool has_program = false;        // the block is a .crl program: it goes to an evaluator
  std::string format_problem;      // why not (when !has_program)
  // judge_programs (a format_error verdict when !has_program)
  eval::Verdict verdict;
  int evaluator_rank = -1;         // world rank (-1: not evaluated, or a reused verdict)
  // assign_rewards
  double reward = 0, normalized = 0, advantage = 0;
  bool included = true;            // counted in the rewards (an internal_error is not: crl's failure)
  bool train = false;              // its completion tokens carry the loss
};

// Wall times and counts of a step for its /steps row.
struct StepTimings {
  double tokens_generated = 0;        // over all trainers
  double seconds_generate = 0;        // the trainers' mean
  double seconds_evaluate = 0;        // rank 0's wall time for the verdicts
  double evaluator_busy_seconds = 0;  // the evaluators' time on the step's programs
  double trainer_wait_seconds = 0;    // trainers' time waiting for the outcome (summed over trainers)
  double seconds_train = 0;
};

// Rank 0's view of a step: every rollout, in index order (group * G + sample).
struct StepBatch {
  StepPlan plan;
  int64_t group_size = 0;
  int64_t policy_version = 0;  // optimiser steps of the policy that generated the rollouts
  std::vector<RolloutRecord> rollouts;
  StepTimings timings;
};

// What every trainer needs of the judged step to update (broadcast from rank 0), by rollout index.
struct StepOutcome {
  std::vector<double> advantages;
  std::vector<bool> train;
  int64_t train_rollouts = 0;     // 0: no update
  std::string evaluation_failed;  // not empty: evaluation failed for eval.max_failed_steps steps; the job stops
};

// One trainer's share of a step as generated, before evaluation.
struct GeneratedStep {
  StepPlan plan;
  int64_t local_step = 0;                           // the stage's step
  int64_t policy_version = 0;                       // optimiser steps of the policy that generated it
  std::vector<std::vector<int64_t>> group_prompts;  // prompt token ids of this trainer's groups (others empty)
  std::vector<RolloutRecord> mine;                  // this trainer's groups' rollouts
  double seconds = 0;                               // generation wall time on this trainer
  std::chrono::steady_clock::time_point finished = std::chrono::steady_clock::now();
};

// A trainer's rollout as rank 0 receives it.
struct CompletionMessage {
  int64_t group = 0, sample = 0;
  std::string text;
  int64_t tokens = 0;
};

void to_json(nlohmann::json& j, const PlannedGroup& g);
void from_json(const nlohmann::json& j, PlannedGroup& g);
void to_json(nlohmann::json& j, const StepOutcome& o);
void from_json(const nlohmann::json& j, StepOutcome& o);
void to_json(nlohmann::json& j, const CompletionMessage& m);
void from_json(const nlohmann::json& j, CompletionMessage& m);

}  // namespace crl::rl
