// Framed messages and the binary tensor format, with every length validated before use.
#include "eval/worker_channel.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace crl::eval {
namespace {

constexpr uint32_t kFrameMagic = 0x46524c43;   // "CRLF" little-endian
constexpr uint32_t kTensorMagic = 0x54524c43;  // "CRLT"
constexpr int kMaxDims = 8;

struct FrameHeader {
  uint32_t magic;
  uint32_t json_bytes;
  uint32_t tensor_count;
  uint32_t reserved;
};

struct TensorHeader {
  uint32_t magic;
  uint8_t dtype;
  uint8_t ndim;
  uint8_t device;
  uint8_t zero;
  int64_t shape[kMaxDims];
  uint64_t data_bytes;
};
static_assert(sizeof(TensorHeader) == 4 + 4 + 8 * kMaxDims + 8);

// The wire's dtype codes; fixed here so the format does not depend on c10's enum order.
constexpr std::array<at::ScalarType, 10> kWireDtypes = {
    at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong,
    at::kInt,   at::kShort, at::kChar,    at::kByte,   at::kBool};

uint8_t wire_dtype(at::ScalarType type) {
  for (size_t i = 0; i < kWireDtypes.size(); ++i) {
    if (kWireDtypes[i] == type) return static_cast<uint8_t>(i);
  }
  throw InputError(fmt::format("output dtype {} cannot be sent (supported: float32, float16, bfloat16, "
                               "float64, int64, int32, int16, int8, uint8, bool)",
                               c10::toString(type)));
}

// Ignores SIGPIPE once per process so a vanished reader is an error code, not a dead process.
void ignore_sigpipe() {
  static const bool done = [] {
    signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)done;
}

void write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) throw ChannelClosed("channel closed by the reader");
    if (n < 0) throw_api_error("OS", "write", std::strerror(errno), __FILE__, __LINE__);
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void read_all(int fd, void* data, size_t size, const Deadline& deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw ChannelTimeout(what + " sent no reply before the deadline");
      pollfd pfd{fd, POLLIN, 0};
      const int r = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw_api_error("OS", "poll", std::strerror(errno), __FILE__, __LINE__);
      if (r == 0) continue;
    }
    const ssize_t n = read(fd, p, std::min<size_t>(size, size_t{1} << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_api_error("OS", "read", std::strerror(errno), __FILE__, __LINE__);
    if (n == 0) throw ChannelClosed(what + " closed the channel");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// A checked tensor header: what the data that follows will be, before anything is allocated.
struct CheckedHeader {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  std::string device;
};

CheckedHeader validate_header(const TensorHeader& h, const ChannelLimits& limits, const std::string& what) {
  if (h.magic != kTensorMagic) throw InputError(what + ": tensor header has a bad magic number");
  if (h.dtype >= kWireDtypes.size()) throw InputError(fmt::format("{}: unknown tensor dtype code {}", what, h.dtype));
  if (h.ndim > kMaxDims) throw InputError(fmt::format("{}: tensor has {} dimensions (at most {})", what, h.ndim, kMaxDims));
  if (h.device > 1) throw InputError(fmt::format("{}: unknown device code {}", what, h.device));
  CheckedHeader out;
  out.dtype = kWireDtypes[h.dtype];
  const uint64_t element = c10::elementSize(out.dtype);
  uint64_t bytes = element;
  // The product of the non-zero extents is bounded too: a zero extent makes the size 0, but
  // extents near 2^62 beside it would still overflow LibTorch's stride computation.
  uint64_t nonzero_bytes = element;
  for (int d = 0; d < h.ndim; ++d) {
    const int64_t extent = h.shape[d];
    if (extent < 0) throw InputError(fmt::format("{}: tensor dimension {} is negative ({})", what, d, extent));
    if (extent != 0 && nonzero_bytes > limits.max_tensor_bytes / static_cast<uint64_t>(extent)) {
      throw InputError(fmt::format("{}: tensor of shape dimension {} = {} exceeds the {} byte limit", what, d,
                                   extent, limits.max_tensor_bytes));
    }
    if (extent != 0) nonzero_bytes *= static_cast<uint64_t>(extent);
    bytes *= static_cast<uint64_t>(extent);
    out.shape.push_back(extent);
  }
  if (bytes != h.data_bytes) {
    throw InputError(fmt::format("{}: tensor declares {} data bytes but its shape and dtype need {}", what,
                                 h.data_bytes, bytes));
  }
  out.device = h.device == 1 ? "cuda" : "cpu";
  return out;
}

// Reads a tensor's data in pieces of at most 64 MiB, each allocated only once the one before it
// arrived: a sender that claims gigabytes must send them before this process holds them.
at::Tensor read_tensor_data(int fd, const CheckedHeader& h, uint64_t bytes, const Deadline& deadline,
                            const std::string& what) {
  constexpr uint64_t kPiece = uint64_t{64} << 20;
  const auto options = at::TensorOptions().dtype(at::kByte);
  if (bytes <= kPiece) {
    at::Tensor flat = at::empty({static_cast<int64_t>(bytes)}, options);
    read_all(fd, flat.data_ptr(), bytes, deadline, what);
    return flat.view(h.dtype).reshape(h.shape);
  }
  std::vector<at::Tensor> pieces;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(kPiece, bytes - done);
    pieces.push_back(at::empty({static_cast<int64_t>(n)}, options));
    read_all(fd, pieces.back().data_ptr(), n, deadline, what);
    done += n;
  }
  return at::cat(pieces).view(h.dtype).reshape(h.shape);
}

TensorHeader make_header(const ProgramOutput& out, at::Tensor* contiguous) {
  if (!out.values.defined()) throw InputError("cannot send an undefined tensor");
  if (out.values.dim() > kMaxDims) {
    throw InputError(fmt::format("cannot send a tensor of {} dimensions (at most {})", out.values.dim(), kMaxDims));
  }
  *contiguous = out.values.to(at::kCPU).contiguous();
  TensorHeader h{};
  h.magic = kTensorMagic;
  h.dtype = wire_dtype(contiguous->scalar_type());
  h.ndim = static_cast<uint8_t>(contiguous->dim());
  h.device = out.device == "cuda" ? 1 : 0;
  for (int d = 0; d < contiguous->dim(); ++d) h.shape[d] = contiguous->size(d);
  h.data_bytes = contiguous->nbytes();
  return h;
}

}  // namespace

void write_message(int fd, const Message& message) {
  ignore_sigpipe();
  const std::string json = message.header.dump();
  FrameHeader frame{kFrameMagic, static_cast<uint32_t>(json.size()), static_cast<uint32_t>(message.tensors.size()), 0};
  write_all(fd, &frame, sizeof frame);
  write_all(fd, json.data(), json.size());
  for (const auto& t : message.tensors) {
    at::Tensor contiguous;
    const TensorHeader h = make_header(t, &contiguous);
    write_all(fd, &h, sizeof h);
    write_all(fd, contiguous.data_ptr(), h.data_bytes);
  }
}

Message read_message(int fd, const Deadline& deadline, const std::string& what, const ChannelLimits& limits) {
  FrameHeader frame{};
  read_all(fd, &frame, sizeof frame, deadline, what);
  if (frame.magic != kFrameMagic) throw InputError(what + ": message has a bad magic number");
  if (frame.json_bytes > limits.max_json_bytes) {
    throw InputError(fmt::format("{}: message header of {} bytes exceeds the {} byte limit", what, frame.json_bytes,
                                 limits.max_json_bytes));
  }
  if (frame.tensor_count > limits.max_tensors) {
    throw InputError(fmt::format("{}: message carries {} tensors (at most {})", what, frame.tensor_count, limits.max_tensors));
  }
  std::string json(frame.json_bytes, '\0');
  read_all(fd, json.data(), json.size(), deadline, what);
  Message message;
  try {
    message.header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(what + ": message header is not valid JSON: " + e.what());
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < frame.tensor_count; ++i) {
    TensorHeader h{};
    read_all(fd, &h, sizeof h, deadline, what);
    const std::string name = fmt::format("{}: tensor {}", what, i);
    const CheckedHeader checked = validate_header(h, limits, name);
    total += h.data_bytes;
    if (total > limits.max_message_bytes) {
      throw InputError(fmt::format("{}: message exceeds the {} byte limit", what, limits.max_message_bytes));
    }
    message.tensors.push_back(ProgramOutput{read_tensor_data(fd, checked, h.data_bytes, deadline, name), checked.device});
  }
  return message;
}

std::string encode_tensor(const ProgramOutput& tensor) {
  at::Tensor contiguous;
  const TensorHeader h = make_header(tensor, &contiguous);
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes.append(static_cast<const char*>(contiguous.data_ptr()), h.data_bytes);
  return bytes;
}

ProgramOutput decode_tensor(const std::string& bytes, const ChannelLimits& limits) {
  TensorHeader h{};
  if (bytes.size() < sizeof h) throw InputError(fmt::format("tensor: {} bytes is shorter than its header", bytes.size()));
  std::memcpy(&h, bytes.data(), sizeof h);
  const CheckedHeader checked = validate_header(h, limits, "tensor");
  if (bytes.size() - sizeof h != h.data_bytes) {
    throw InputError(fmt::format("tensor: {} data bytes follow the header, which declares {}", bytes.size() - sizeof h,
                                 h.data_bytes));
  }
  // Allocated only now that the bytes are known to be there.
  ProgramOutput out{at::empty(checked.shape, at::TensorOptions().dtype(checked.dtype)), checked.device};
  // An empty tensor has no storage (data_ptr null), and memcpy's pointers must not be null even
  // for 0 bytes (UBSan's finding, fuzz_worker_channel).
  if (h.data_bytes > 0) std::memcpy(out.values.data_ptr(), bytes.data() + sizeof h, h.data_bytes);
  return out;
}

}  // namespace crl::eval
