// The program workers' CPU allocator: large blocks page-aligned whatever was allocated before, small
// ones as LibTorch aligns them, and tensors made with it behave as any other.
#include "worker/page_aligned_allocator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace crl::worker {
namespace {

uintptr_t within_page(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 4096; }

TEST(PageAlignedAllocator, LargeBlocksStartOnAPageWhateverCameBefore) {
  use_page_aligned_cpu_allocator();
  std::vector<at::Tensor> history;
  for (int i = 1; i < 40; ++i) history.push_back(at::empty({i * 37}, at::kFloat));  // odd sizes: a history
  for (const int64_t floats : {int64_t{16384}, int64_t{262144}, int64_t{100003}}) {
    const at::Tensor big = at::empty({floats}, at::kFloat);
    EXPECT_EQ(within_page(big), 0u) << floats << " floats";
  }
  // LibTorch's own ops allocate their outputs through it too.
  const at::Tensor x = at::randn({16, 16384});
  const at::Tensor y = at::relu(x);
  EXPECT_EQ(within_page(y), 0u);
  EXPECT_TRUE(at::equal(y, x.clamp_min(0)));
  const at::Tensor small = at::empty({10}, at::kFloat);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data_ptr()) % 64, 0u);
}

}  // namespace
}  // namespace crl::worker
