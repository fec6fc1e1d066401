// Page-aligned large CPU allocations for crl-worker (see page_aligned_allocator.h).
#include "worker/page_aligned_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace crl::worker {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kLarge = 64 << 10;

void release(void* p) { std::free(p); }

class PageAlignedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    void* p = nullptr;
    const size_t alignment = bytes >= kLarge ? kPage : c10::gAlignment;
    // (LibTorch asks for zero bytes too: a real pointer keeps data_ptr() distinct, as its own does)
    if (posix_memalign(&p, alignment, bytes == 0 ? alignment : bytes) != 0) throw std::bad_alloc();
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

}  // namespace

void use_page_aligned_cpu_allocator() {
  static PageAlignedAllocator allocator;
  // Priority above LibTorch's default (0), so nothing registered at priority 0 replaces it later.
  c10::SetCPUAllocator(&allocator, 1);
}

}  // namespace crl::worker
