// The private channel between the evaluator and a crl-worker: framed messages over a pair of
// pipes, each a JSON header followed by tensors in a validated binary format.
//
// Frame:  u32 magic "CRLF" | u32 json_bytes | u32 tensor_count | u32 reserved | json | tensors
// Tensor: u32 magic "CRLT" | u8 dtype | u8 ndim | u8 device (0 cpu, 1 cuda) | u8 0 |
//         i64 shape[8] | u64 data_bytes | data (contiguous, native little-endian)
// Every length is checked against limits and against the shape before memory is allocated.
#pragma once

#include <ATen/Tensor.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "eval/output_comparison.h"

namespace crl::eval {

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

struct ChannelLimits {
  uint32_t max_json_bytes = 16u << 20;
  uint32_t max_tensors = 1024;
  uint64_t max_tensor_bytes = uint64_t{64} << 30;
  uint64_t max_message_bytes = uint64_t{128} << 30;
};

struct Message {
  nlohmann::json header;
  std::vector<ProgramOutput> tensors;
};

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Writes one frame to `fd` (blocking; a closed reader gives ChannelClosed, never SIGPIPE).
// Tensors are copied to contiguous CPU memory first; their `device` field is sent as given.
void write_message(int fd, const Message& message);

// Reads one frame from `fd`. Without a deadline it blocks; with one it polls and throws
// ChannelTimeout when the deadline passes. Malformed frames throw InputError saying which field
// is wrong. `what` names the sender in messages ("worker 1234").
Message read_message(int fd, const Deadline& deadline, const std::string& what,
                     const ChannelLimits& limits = {});

// Byte-level encoding of one tensor, exposed for tests of the validation.
std::string encode_tensor(const ProgramOutput& tensor);
ProgramOutput decode_tensor(const std::string& bytes, const ChannelLimits& limits = {});

}  // namespace crl::eval
