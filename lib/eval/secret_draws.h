// Every number an evaluation draws from its secret, in one place and in a fixed order: the trial
// seeds, the edge trials' seeds, and the timing's draws (each timed slot's input seed, which
// program of a pair goes first, the slot checked after it). `crl eval --seed S` replays an
// evaluation exactly because these are pure functions of (secret, task, counter); a test pins them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crl::eval {

// A secret no candidate can know in advance (60 bits): the evaluation's inputs are drawn from it.
uint64_t fresh_secret();

// Seeds of the correctness trials of a task under a secret (EvalOptions::seed, or the judge's).
std::vector<uint64_t> trial_seeds(uint64_t secret, int trials, const std::string& task_id);
// Seeds of the edge trials (tasks that declare edges: program/edge_inputs.h).
std::vector<uint64_t> edge_trial_seeds(uint64_t secret, int count, const std::string& task_id);
// The seed of the speedup's bootstrap.
uint64_t bootstrap_seed(uint64_t secret, const std::string& task_id);
// The seed of the judge's domain probe of the value mix (program/value_mix.h).
uint64_t value_probe_seed(uint64_t secret, const std::string& task_id);
// The seed KernelBench's Model and a candidate's ModelNew are built under (KernelBench's rule for
// parameters, EvalOptions::kernelbench_dir): 60 bits, never 0 (0 means crl's rule).
uint64_t kernelbench_seed_of(uint64_t secret, const std::string& task_id);

// The `index`-th draw of a task's timing under a secret (60 bits): its slots' input seeds, each
// pair's order and checked slot, in the order the evaluator makes them. Whoever knows the secret
// knows them all, so the secret must be fresh where candidates are judged for a reward (the job
// draws one per judged task); EvalOptions::seed is for replaying an evaluation.
uint64_t timing_draw(uint64_t secret, const std::string& task_id, uint64_t index);

// The timing's draws in order: each a hash of the secret, the task and a counter, so that no number
// of them tells another. A linear generator would not do: mt19937_64's state follows from a few
// hundred of its outputs, the inputs a candidate sees are made from them, and the state would name
// the slot to be checked before the batch (computing only that one would pass at any speed).
class SecretDraws {
 public:
  SecretDraws() = default;
  SecretDraws(uint64_t secret, std::string task_id) : secret_(secret), task_id_(std::move(task_id)) {}
  uint64_t next() { return timing_draw(secret_, task_id_, count_++); }

 private:
  uint64_t secret_ = 0;
  std::string task_id_;
  uint64_t count_ = 0;
};

// One timed pair's draws: its slots' input seeds, whether the reference's batch goes first, and
// the slot checked after the pair. Drawn in this order (seeds, order, checked slot), as ever.
struct PairDraws {
  std::vector<uint64_t> seeds;
  bool reference_first = false;
  int checked_slot = 0;
};
// The warm-up batch's input seeds (one per slot), drawn before the first pair.
std::vector<uint64_t> draw_warmup(SecretDraws& draws, int slots);
PairDraws draw_pair(SecretDraws& draws, int slots);

}  // namespace crl::eval
