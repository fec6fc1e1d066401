// The job's seeds (core/seeds.h) keep their values: a resumed run, and a run of an older build's job,
// draw the same tasks, exemplars, samples, SFT order and LoRA initialisation only while they do.
// The expected values were computed apart from C++ (Python integers mod 2^64).
#include <gtest/gtest.h>

#include "core/seeds.h"

namespace crl::seeds {
namespace {

TEST(Seeds, ValuesArePinned) {
  EXPECT_EQ(task_draw_seed(1, 3), 0x0e09576d6d91136dull);
  EXPECT_EQ(task_draw_seed(7, 0), 0x538454127b096494ull);
  EXPECT_EQ(sft_shuffle_seed(1, 1, 2), 1007924ull);
  EXPECT_EQ(exemplar_seed(1, 3), 0x892ebb5258fb901dull);
  EXPECT_EQ(sampling_seed(1, 3, 1), 0x946266aa32cc031bull);
  EXPECT_EQ(validation_sampling_seed(1, 3, 1), 0x3e9bf3388a140fe2ull);
  EXPECT_EQ(lora_seed(1), 0x9e3779b9cbb9ce56ull);
  // (seed * K + c) ^ rank, as C++'s precedence read the original formula, not seed * K + (c ^ rank).
  EXPECT_EQ(torch_seed(1, 1), 0x9e3779b9f1abe582ull);
}

TEST(Seeds, EachDependsOnWhatItNames) {
  EXPECT_NE(task_draw_seed(1, 3), task_draw_seed(1, 4));
  EXPECT_NE(task_draw_seed(1, 3), task_draw_seed(2, 3));
  EXPECT_NE(sft_shuffle_seed(1, 1, 2), sft_shuffle_seed(1, 2, 2));
  EXPECT_NE(sft_shuffle_seed(1, 1, 2), sft_shuffle_seed(1, 1, 3));
  EXPECT_NE(exemplar_seed(1, 3), exemplar_seed(1, 4));
  EXPECT_NE(sampling_seed(1, 3, 0), sampling_seed(1, 3, 1));
  EXPECT_NE(validation_sampling_seed(1, 3, 1), sampling_seed(1, 3, 1));  // apart from the training steps' draws
  EXPECT_NE(torch_seed(1, 0), torch_seed(1, 1));
  // Usable where a constant must be (they are constexpr).
  static_assert(lora_seed(0) == 0x4C6F5241ull);
}

}  // namespace
}  // namespace crl::seeds
