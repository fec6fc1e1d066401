// A trainer's (prompt, completion) sequences packed into the micro-batches Trainer::step takes:
// right padded, the loss on the completion tokens of the sequences that train, with each row's
// advantage and, where the rollout has them, the generating policy's log-probs (staleness 1).
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rl/train_step.h"

namespace crl::rl {

struct Sequence {
  const std::vector<int64_t>* prompt;
  const std::vector<int64_t>* completion;
  bool train;        // its completion tokens are loss targets
  double advantage;
  const std::vector<float>* generating_logp = nullptr;  // per completion token (null: none, e.g. planted)
};

struct MicroBatchOptions {
  size_t size = 4;             // sequences per micro-batch (job key micro_batch_size)
  int64_t pad_token_id = 0;
  torch::Device device = torch::kCPU;
};

// Per micro-batch, beside the batches themselves: `advantages` [B] fp32; `generating_logp`
// [B, S] fp32, each completion token's generating log-prob at its column (as next_token_log_probs
// places them); `has_generating_logp` [B] bool, which rows have them.
struct MicroBatches {
  std::vector<MicroBatch> batches;
  std::vector<torch::Tensor> advantages, generating_logp, has_generating_logp;
};

// Consecutive runs of options.size sequences, each micro-batch as wide as its longest sequence
// (at least 2). Throws Error when a sequence's log-probs do not match its completion's length,
// InputError when options.size is 0.
MicroBatches micro_batches(const std::vector<Sequence>& sequences, const MicroBatchOptions& options);

}  // namespace crl::rl
