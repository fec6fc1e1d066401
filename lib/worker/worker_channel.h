// The private channel between the evaluator and a crl-worker: framed JSON messages over a pair of
// pipes (protocol.h gives them their types). Tensors never cross it: inputs lie in arenas the judge
// fills, outputs are described by TensorRefs and read where they are (exchange.h).
//
// Frame:  u32 magic "CRLJ" | u32 json_bytes | json
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"

namespace crl::worker {

// The other end closed the channel (the worker exited or crashed) before a whole frame arrived.
class ChannelClosed : public Error {
 public:
  using Error::Error;
};

// No whole frame arrived before the deadline.
class ChannelTimeout : public Error {
 public:
  using Error::Error;
};

// A message's JSON, at most (a timed batch of 4096 calls describes its outputs in well under this).
constexpr uint32_t kMaxMessageBytes = 16u << 20;

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Writes one frame to `fd` (blocking; a closed reader gives ChannelClosed, never SIGPIPE).
void write_message(int fd, const nlohmann::json& message);

// Reads one frame from `fd`. Without a deadline it blocks; with one it polls and throws
// ChannelTimeout when the deadline passes. A malformed frame throws InputError saying what is
// wrong. `what` names the sender in messages ("worker 1234").
nlohmann::json read_message(int fd, const Deadline& deadline, const std::string& what, uint32_t max_bytes = kMaxMessageBytes);

}  // namespace crl::worker
