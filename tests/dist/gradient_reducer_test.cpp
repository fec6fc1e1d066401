// GradientReducer on one rank (the local communicator): fp32 slots hold the sum over a step's
// micro-batches, and a parameter that gets no gradient in a step reads zero, whatever it held
// before (slots are not zeroed at the step's start, only at launch).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "dist/communicator.h"
#include "dist/gradient_reducer.h"

namespace crl::dist {
namespace {

TEST(GradientReducer, SumsMicroBatchesAndZeroesParametersWithoutGradient) {
  auto comm = make_local_communicator();
  torch::Tensor a = torch::ones({3}).requires_grad_(true);
  torch::Tensor b = torch::ones({2}, torch::kBFloat16).requires_grad_(true);
  ReducerOptions options;
  options.bucket_bytes = 8;  // a bucket per parameter: one is launched from its hook, one at finish
  GradientReducer reducer({a, b}, *comm, options);
  ASSERT_EQ(reducer.bucket_count(), 2u);

  reducer.begin_step();
  ((a * 2).sum() + (b * 3).sum()).backward();
  reducer.finish();
  EXPECT_TRUE(torch::equal(reducer.gradients()[0], torch::full({3}, 2.0f)));
  EXPECT_TRUE(torch::equal(reducer.gradients()[1], torch::full({2}, 3.0f)));

  // Two micro-batches; b gets no gradient in this step: its slot must not keep the 3 from before.
  reducer.begin_step();
  reducer.begin_micro_batch(false);
  (a * 1).sum().backward();
  reducer.begin_micro_batch(true);
  ((a * 4).sum() + (a * 0.5).sum()).backward();  // two uses of a in one backward: both count
  reducer.finish();
  EXPECT_TRUE(torch::equal(reducer.gradients()[0], torch::full({3}, 5.5f)));
  EXPECT_TRUE(torch::equal(reducer.gradients()[1], torch::zeros({2})));
  EXPECT_EQ(reducer.gradients()[1].scalar_type(), torch::kFloat32);
}

}  // namespace
}  // namespace crl::dist
