// Schemas and row conversion of the job's /steps and /rollouts tables.
#include "rl/job_tables.h"

#include <algorithm>

namespace crl::rl {

using results::ColumnType;

const results::TableSchema& steps_schema() {
  static const results::TableSchema schema = {
      {"step", ColumnType::int64},          {"stage", ColumnType::string},
      {"policy_version", ColumnType::int64}, {"loss", ColumnType::float64},
      {"grad_norm", ColumnType::float64},   {"lr", ColumnType::float64},
      {"skipped", ColumnType::boolean},     {"reward_mean", ColumnType::float64},
      {"reward_median", ColumnType::float64}, {"reward_max", ColumnType::float64},
      {"n_ok", ColumnType::int64},          {"n_compile_error", ColumnType::int64},
      {"n_runtime_error", ColumnType::int64}, {"n_timeout", ColumnType::int64},
      {"n_crash", ColumnType::int64},       {"n_mismatch", ColumnType::int64},
      {"n_hack", ColumnType::int64},        {"n_format_error", ColumnType::int64},
      {"n_internal_error", ColumnType::int64}, {"tokens_generated", ColumnType::int64},
      {"tokens_trained", ColumnType::int64}, {"seconds_generate", ColumnType::float64},
      {"seconds_evaluate", ColumnType::float64}, {"seconds_train", ColumnType::float64},
      {"evaluator_busy_fraction", ColumnType::float64}, {"trainer_wait_seconds", ColumnType::float64},
      {"seconds_step", ColumnType::float64}, {"restart", ColumnType::int64},       {"superseded", ColumnType::boolean},
      // steps_telemetry_columns(), in its order
      {"entropy", ColumnType::float64},     {"kl", ColumnType::float64},
      {"clip_fraction", ColumnType::float64}, {"completion_tokens_mean", ColumnType::float64},
      {"completion_tokens_max", ColumnType::float64}, {"advantage_mean", ColumnType::float64},
      {"advantage_std", ColumnType::float64}, {"zero_advantage_fraction", ColumnType::float64}};
  return schema;
}

const results::TableSchema& steps_telemetry_columns() {
  static const results::TableSchema columns = [] {
    const results::TableSchema& all = steps_schema();
    const auto first = std::find_if(all.begin(), all.end(), [](const auto& c) { return c.name == "entropy"; });
    return results::TableSchema(first, all.end());
  }();
  return columns;
}

const results::TableSchema& rollouts_schema() {
  static const results::TableSchema schema = {
      {"rollout_id", ColumnType::int64},     {"step", ColumnType::int64},
      {"stage", ColumnType::string},         {"task", ColumnType::string},
      {"group", ColumnType::int64},          {"sample", ColumnType::int64},
      {"status", ColumnType::string},        {"speedup", ColumnType::float64},
      {"speedup_ci_low", ColumnType::float64}, {"speedup_ci_high", ColumnType::float64},
      {"speedup_ci_half_width", ColumnType::float64},
      {"candidate_median_us", ColumnType::float64}, {"reference_median_us", ColumnType::float64},
      {"scale", ColumnType::string},         {"reward", ColumnType::float64},       {"normalized_reward", ColumnType::float64},
      {"advantage", ColumnType::float64},    {"completion_tokens", ColumnType::int64},
      {"evaluator_rank", ColumnType::int64}, {"exemplar_ids", ColumnType::string},
      {"policy_version", ColumnType::int64}, {"restart", ColumnType::int64},
      {"superseded", ColumnType::boolean}};
  return schema;
}

results::RowBatch step_rows(const std::vector<StepRow>& rows) {
  results::RowBatch batch(steps_schema());
  for (const StepRow& r : rows) {
    batch.add_row({r.step, r.stage, r.policy_version, r.loss, r.grad_norm, r.lr, r.skipped, r.reward_mean,
                   r.reward_median, r.reward_max, r.n_ok, r.n_compile_error, r.n_runtime_error, r.n_timeout, r.n_crash,
                   r.n_mismatch, r.n_hack, r.n_format_error, r.n_internal_error, r.tokens_generated, r.tokens_trained,
                   r.seconds_generate, r.seconds_evaluate, r.seconds_train, r.evaluator_busy_fraction,
                   r.trainer_wait_seconds, r.seconds_step, r.restart, r.superseded, r.entropy, r.kl, r.clip_fraction,
                   r.completion_tokens_mean, r.completion_tokens_max, r.advantage_mean, r.advantage_std,
                   r.zero_advantage_fraction});
  }
  return batch;
}

results::RowBatch rollout_rows(const std::vector<RolloutRow>& rows) {
  results::RowBatch batch(rollouts_schema());
  for (const RolloutRow& r : rows) {
    batch.add_row({r.rollout_id, r.step, r.stage, r.task, r.group, r.sample, r.status, r.speedup, r.speedup_ci_low,
                   r.speedup_ci_high, r.speedup_ci_half_width, r.candidate_median_us, r.reference_median_us, r.scale, r.reward,
                   r.normalized_reward, r.advantage, r.completion_tokens, r.evaluator_rank,
                   r.exemplar_ids, r.policy_version, r.restart, r.superseded});
  }
  return batch;
}

}  // namespace crl::rl
