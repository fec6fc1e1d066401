// The turn page of a timed batch (call_turns.h).
#include "worker/call_turns.h"

#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "core/error.h"

namespace crl::worker {
namespace {

uint32_t* futex_word(const std::atomic<uint32_t>& word) {
  // std::atomic<uint32_t> is lock-free and the size of its value (static_asserts in the header).
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint32_t>*>(&word));
}

}  // namespace

void cpu_relax() {
  // The scheduler's yield, not only the CPU's pause hint: where the core is wanted (two
  // evaluations side by side on two cores, a program's own threads) the spinner gives it up at
  // once instead of holding it for a time slice; where the core is idle it returns at once.
  sched_yield();
}

void wait_while_equal(const std::atomic<uint32_t>& word, uint32_t seen, int timeout_ms) {
  if (word.load(std::memory_order_acquire) != seen) return;
  timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  // Not FUTEX_PRIVATE: the page is shared between processes.
  (void)syscall(SYS_futex, futex_word(word), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void wake_all(std::atomic<uint32_t>& word) { (void)syscall(SYS_futex, futex_word(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0); }

void TurnGate::wait_for_turn(uint32_t call) const {
  // Spinning first: the evaluator gives the turn within microseconds of the call before, and a
  // worker that slept paid the scheduler's wake-up (20-40 us on two cores, varying) at every call.
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kTurnSpinMicroseconds);
  while (std::chrono::steady_clock::now() < spin_until) {
    if (page_->go.load(std::memory_order_acquire) > call) return;
    cpu_relax();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds_);
  for (;;) {
    const uint32_t go = page_->go.load(std::memory_order_acquire);
    if (go > call) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(fmt::format("call {} of a timed batch never got its turn within {:.0f} s", call, timeout_seconds_));
    }
    wait_while_equal(page_->go, go, 100);
  }
}

void TurnGate::finish(uint32_t call, const std::vector<at::Tensor>& outputs) {
  const size_t n = std::min<size_t>(outputs.size(), kMaxTurnOutputs);
  for (size_t i = 0; i < n; ++i) {
    page_->outputs[i] = {reinterpret_cast<uint64_t>(outputs[i].data_ptr()), static_cast<uint64_t>(outputs[i].nbytes())};
  }
  page_->output_count.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  page_->done.store(call + 1, std::memory_order_release);
  wake_all(page_->done);
}

}  // namespace crl::worker
