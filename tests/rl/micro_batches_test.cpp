// Packing a trainer's sequences into micro-batches (rl/micro_batches.h): their size (job key
// micro_batch_size), right padding, the loss on completion tokens of training rows only, advantages,
// and the generating policy's log-probs at their columns.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "rl/micro_batches.h"

namespace crl::rl {
namespace {

TEST(MicroBatches, RunsOfTheConfiguredSizeEachAsWideAsItsLongestSequence) {
  const std::vector<int64_t> p1 = {1, 2}, c1 = {3}, p2 = {4}, c2 = {5, 6, 7}, p3 = {8}, c3 = {9};
  const std::vector<Sequence> seqs = {{&p1, &c1, true, 0.5}, {&p2, &c2, true, -1.0}, {&p3, &c3, false, 2.0},
                                      {&p1, &c1, true, 0.0}, {&p3, &c3, true, 0.0}};
  MicroBatchOptions options;
  options.size = 2;
  options.pad_token_id = 99;
  const MicroBatches out = micro_batches(seqs, options);
  ASSERT_EQ(out.batches.size(), 3u);
  EXPECT_EQ(out.batches[0].input_ids.sizes(), (std::vector<int64_t>{2, 4}));  // p2 + c2 is the longest
  EXPECT_EQ(out.batches[1].input_ids.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out.batches[2].input_ids.sizes(), (std::vector<int64_t>{1, 2}));  // at least 2 wide
  EXPECT_TRUE(torch::equal(out.batches[0].input_ids, torch::tensor({{1, 2, 3, 99}, {4, 5, 6, 7}}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(out.batches[0].padding_mask, torch::tensor({{1, 1, 1, 0}, {1, 1, 1, 1}}, torch::kInt64)));
  // The loss on completion tokens of training rows, never on column 0.
  EXPECT_TRUE(torch::equal(out.batches[0].loss_mask, torch::tensor({{0, 0, 1, 0}, {0, 1, 1, 1}}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(out.batches[1].loss_mask, torch::tensor({{0, 0, 0}, {0, 0, 1}}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(out.advantages[0], torch::tensor({0.5f, -1.0f})));
  EXPECT_TRUE(torch::equal(out.advantages[1], torch::tensor({2.0f, 0.0f})));
  // The job's default, 4: two micro-batches.
  EXPECT_EQ(micro_batches(seqs, MicroBatchOptions{}).batches.size(), 2u);
  EXPECT_EQ(micro_batches(seqs, MicroBatchOptions{}).batches[0].input_ids.size(0), 4);
}

TEST(MicroBatches, GeneratingLogProbsSitAtTheirCompletionTokensColumns) {
  const std::vector<int64_t> prompt = {1, 2}, completion = {3, 4};
  const std::vector<float> logp = {-0.5f, -1.5f};
  const std::vector<Sequence> seqs = {{&prompt, &completion, true, 1.0, &logp}, {&prompt, &completion, true, 1.0, nullptr}};
  const MicroBatches out = micro_batches(seqs, MicroBatchOptions{});
  ASSERT_EQ(out.batches.size(), 1u);
  EXPECT_TRUE(torch::equal(out.generating_logp[0], torch::tensor({{0.0f, 0.0f, -0.5f, -1.5f}, {0.0f, 0.0f, 0.0f, 0.0f}})));
  EXPECT_TRUE(torch::equal(out.has_generating_logp[0], torch::tensor({true, false})));
}

TEST(MicroBatches, RefusesLogProbsThatDoNotMatchTheTokensAndASizeOfZero) {
  const std::vector<int64_t> prompt = {1}, completion = {3, 4};
  const std::vector<float> short_logp = {-0.5f};
  EXPECT_THROW(micro_batches({{&prompt, &completion, true, 0, &short_logp}}, MicroBatchOptions{}), Error);
  MicroBatchOptions zero;
  zero.size = 0;
  EXPECT_THROW(micro_batches({{&prompt, &completion, true, 0}}, zero), InputError);
}

}  // namespace
}  // namespace crl::rl
