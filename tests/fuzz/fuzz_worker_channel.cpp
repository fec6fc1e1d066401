// libFuzzer harness: frames on the evaluator <-> crl-worker channel (lib/worker/worker_channel.h),
// fed through a pipe to read_message as a worker would send them, then decoded strictly as every
// request and reply of the protocol (lib/worker/protocol.h). A malformed frame or message must be an
// InputError or ChannelClosed, never a crash or an allocation of what the frame claims.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "worker/protocol.h"
#include "worker/worker_channel.h"

namespace {

using namespace crl::worker;

template <typename Request>
void decode_both(const nlohmann::json& message) {
  try {
    (void)decode_request<Request>(message);
  } catch (const crl::InputError&) {
  }
  try {
    (void)decode_reply<typename Request::Reply>(message, Request::op);
  } catch (const crl::InputError&) {
  }
}

void decode_all(const nlohmann::json& message) {
  try {
    (void)request_op(message);
  } catch (const crl::InputError&) {
  }
  try {
    (void)reply_error(message, Op::run);
  } catch (const crl::InputError&) {
  }
  decode_both<LoadRequest>(message);
  decode_both<ArenaRequest>(message);
  decode_both<AdoptArenaRequest>(message);
  decode_both<DropArenaRequest>(message);
  decode_both<FillRequest>(message);
  decode_both<RunRequest>(message);
  decode_both<TimeRequest>(message);
  decode_both<StartTimingRequest>(message);
  decode_both<GuardRequest>(message);
  decode_both<ReferenceRequest>(message);
  decode_both<ReferenceSlotRequest>(message);
  decode_both<BatchCopyRequest>(message);
  decode_both<CallTimeRequest>(message);
  decode_both<CompareRequest>(message);
  decode_both<CheckInputsRequest>(message);
  decode_both<ProbeRequest>(message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 60000) return 0;  // one pipe buffer, so the write below cannot block
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return 0;
  if (write(fds[1], data, size) != static_cast<ssize_t>(size)) __builtin_trap();
  close(fds[1]);
  try {
    decode_all(read_message(fds[0], std::nullopt, "fuzzed worker"));
  } catch (const ChannelClosed&) {
  } catch (const crl::InputError&) {
  }
  close(fds[0]);
  return 0;
}
