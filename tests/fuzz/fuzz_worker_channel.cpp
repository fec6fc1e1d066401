// libFuzzer harness: frames on the evaluator <-> crl-worker channel (lib/eval/worker_channel.h),
// fed through a pipe to read_message as a worker would send them, and single tensors to
// decode_tensor. A malformed frame must be an InputError or ChannelClosed, never a crash or an
// allocation of what the frame claims.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "eval/worker_channel.h"

// The channel's default limits, as crl-worker and the evaluator use them. The regression inputs
// (corpus/fuzz_worker_channel/regression-*, found by this harness) are a 100-byte frame and a
// tensor that claim 32 GiB (the reader once allocated what they claimed before any data came) and
// a zero extent beside extents near 2^62 (it overflowed LibTorch's strides: c10::Error, not
// InputError). The reader now allocates only what has arrived and bounds the non-zero extents.
const crl::eval::ChannelLimits kLimits{};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 60000) return 0;  // one pipe buffer, so the write below cannot block
  const bool whole_frame = data[0] & 1;
  ++data;
  --size;
  if (!whole_frame) {
    try {
      crl::eval::decode_tensor(std::string(reinterpret_cast<const char*>(data), size), kLimits);
    } catch (const crl::InputError&) {
    }
    return 0;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return 0;
  if (size > 0 && write(fds[1], data, size) != static_cast<ssize_t>(size)) __builtin_trap();
  close(fds[1]);
  try {
    crl::eval::read_message(fds[0], std::nullopt, "fuzzed worker", kLimits);
  } catch (const crl::eval::ChannelClosed&) {
  } catch (const crl::InputError&) {
  }
  close(fds[0]);
  return 0;
}
