// The seeds of `crl run`'s random draws, each a function of the job's seed (and where it varies, the
// step or the trainer), named in one place: a resumed run draws what the uninterrupted one would
// have only while these stay as they are, so their values are pinned by tests/core/seeds_test.cpp.
// The formulas are the job's original ones, kept verbatim (changing one changes every run's draws).
#pragma once

#include <cstdint>

namespace crl::seeds {

// The tasks of job step `job_step` (rl's plan: a shuffle of the job's tasks per round).
constexpr uint64_t task_draw_seed(uint64_t job_seed, int64_t job_step) {
  return job_seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(job_step) * 0x2545F4914F6CDD1Dull + 1;
}

// The order of an sft stage's examples in `epoch` (the stage's index in the job file: two sft
// stages on the same data shuffle differently).
constexpr uint64_t sft_shuffle_seed(uint64_t job_seed, uint64_t stage_index, int64_t epoch) {
  return job_seed * 1000003 + stage_index * 7919 + static_cast<uint64_t>(epoch);
}

// The exemplars that the prompts of job step `job_step` show (bucket sampling).
constexpr uint64_t exemplar_seed(uint64_t job_seed, int64_t job_step) {
  return job_seed ^ (0xA24BAED4963EE407ull * static_cast<uint64_t>(job_step + 1));
}

// The generation engine's sampling in job step `job_step` on trainer `trainer_rank`.
constexpr uint64_t sampling_seed(uint64_t job_seed, int64_t job_step, int trainer_rank) {
  return job_seed * 6364136223846793005ull + static_cast<uint64_t>(job_step) * 1442695040888963407ull +
         static_cast<uint64_t>(trainer_rank);
}

// The generation engine's sampling of the held-out validation after job step `job_step` on trainer
// `trainer_rank` (job key `validation`): apart from the training steps' draws.
constexpr uint64_t validation_sampling_seed(uint64_t job_seed, int64_t job_step, int trainer_rank) {
  return sampling_seed(job_seed ^ 0x56414C4944415445ull, job_step, trainer_rank);
}

// The LoRA adapters' initial A matrices (every trainer alike).
constexpr uint64_t lora_seed(uint64_t job_seed) { return job_seed * 0x9E3779B97F4A7C15ull + 0x4C6F5241ull; }

// LibTorch's default generators on trainer `trainer_rank` (LoRA dropout). The parentheses are
// C++'s precedence made visible: the sum, then the xor.
constexpr uint64_t torch_seed(uint64_t job_seed, int trainer_rank) {
  return (job_seed * 0x9E3779B97F4A7C15ull + 0x7261696E) ^ static_cast<uint64_t>(trainer_rank);
}

}  // namespace crl::seeds
