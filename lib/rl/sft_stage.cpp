// The sft stage: batches of the data file's examples, one optimiser step each (sft_stage.h).
#include "rl/sft_stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "core/clock.h"
#include "core/error.h"
#include "core/seeds.h"
#include "policy/checkpoint.h"
#include "rl/losses.h"
#include "rl/sft_data.h"

namespace crl::rl {
namespace {

// This trainer's share of batch `b` of `order` (examples i = rank, rank + T, ...) as sequences.
struct SftBatch {
  std::vector<std::vector<int64_t>> prompts, completions;
  std::vector<Sequence> sequences;
};

void fill_batch(SftBatch& batch, TrainerRank& rank, const std::vector<SftExample>& examples, const std::vector<size_t>& order,
                int64_t b, int64_t per_batch) {
  const Suite& suite = rank.context().suite;
  const int trainer = rank.trainers().rank(), trainers = rank.trainers().size();
  for (int64_t i = b * per_batch; i < std::min<int64_t>((b + 1) * per_batch, static_cast<int64_t>(order.size())); ++i) {
    if (i % trainers != trainer) continue;
    const SftExample& e = examples[order[static_cast<size_t>(i)]];
    batch.prompts.push_back(rank.prompt_ids(rank.context().render_prompt(suite.find(e.task), {})));
    batch.completions.push_back(rank.completion_ids(e.completion));
  }
  for (size_t i = 0; i < batch.prompts.size(); ++i) batch.sequences.push_back({&batch.prompts[i], &batch.completions[i], true, 0});
  static const std::vector<int64_t> kDummy = {0, 0};
  if (batch.sequences.empty()) batch.sequences.push_back({&kDummy, &kDummy, false, 0});  // this rank has no example in a short batch
}

}  // namespace

void run_sft_stage(TrainerRank& rank, size_t index, const StageConfig& stage) {
  const std::vector<SftExample> examples = read_sft_jsonl(stage.data);
  if (examples.empty()) throw InputError(fmt::format("{}: no examples", stage.data));
  for (const SftExample& e : examples) rank.context().suite.find(e.task);
  const int64_t per_epoch = (static_cast<int64_t>(examples.size()) + stage.batch - 1) / stage.batch;
  const int64_t total = per_epoch * stage.epochs;
  auto trainer = rank.make_trainer(stage, total);
  int64_t first = 0;  // the data cursor: batches done
  if (const ResumePoint* resume = rank.context().resuming_stage(index)) {
    first = resume->state.stage_steps;
    policy::load_checkpoint_optimizer(resume->dir, trainer->optimizer());
    policy::load_checkpoint_generators(resume->dir, rank.trainers().rank());
  }
  Coordinator* coordinator = rank.coordinator();
  std::vector<size_t> order(examples.size());
  if (coordinator != nullptr) coordinator->start_stage_clock(first);
  for (int64_t done = first; done < total; ++done) {
    const int64_t epoch = done / per_epoch, b = done % per_epoch;
    if (done == first || b == 0) {  // the epoch's order, from the seed: the same after a resume
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 rng(seeds::sft_shuffle_seed(rank.job().seed, index, epoch));
      std::shuffle(order.begin(), order.end(), rng);
    }
    SftBatch batch;
    fill_batch(batch, rank, examples, order, b, stage.batch);
    const MicroBatches packed = micro_batches(batch.sequences, rank.micro_batch_options());
    const auto train_start = std::chrono::steady_clock::now();
    const int64_t version = rank.policy_version();
    const StepStats stats = trainer->step(packed.batches, [&](const torch::Tensor& logits, size_t i) {
      return sft_loss(logits, packed.batches[i].input_ids, packed.batches[i].loss_mask).sum;
    });
    if (!stats.skipped) ++rank.policy_version();  // a skipped step (non-finite gradient) changed nothing
    if (coordinator != nullptr) {
      StepRow row;
      row.step = rank.job_step();
      row.stage = "sft";
      row.policy_version = version;
      row.loss = stats.loss;
      row.grad_norm = stats.grad_norm;
      row.lr = stats.lr;
      row.skipped = stats.skipped || !std::isfinite(stats.loss);
      row.tokens_trained = stats.tokens;
      row.seconds_train = seconds_since(train_start);
      coordinator->record_sft_step(row, done + 1, total);
    }
    ++rank.job_step();
    const CheckpointAt here{index, done + 1, false, stage.checkpoint.keep, false, nullptr};
    const bool periodic = rank.checkpoint_due(stage.checkpoint, done + 1, total);
    if (periodic) rank.save_checkpoint(*trainer, here);
    if (done + 1 < total && rank.stop_agreed("sft")) {
      if (!periodic) rank.save_checkpoint(*trainer, here);
      return;
    }
  }
  rank.finish_stage(index, stage, *trainer);
}

}  // namespace crl::rl
