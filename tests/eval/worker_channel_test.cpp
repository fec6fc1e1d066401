// The worker channel: messages with tensors survive a pipe; malformed frames are rejected.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "eval/worker_channel.h"

namespace crl::eval {
namespace {

struct Pipe {
  int fds[2];
  Pipe() { EXPECT_EQ(pipe(fds), 0); }
  ~Pipe() {
    close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
  }
  void close_writer() {
    close(fds[1]);
    fds[1] = -1;
  }
};

TEST(WorkerChannel, MessageWithTensorsSurvivesAPipe) {
  Pipe p;
  Message sent;
  sent.header = {{"op", "run"}, {"seed", 42}};
  sent.tensors = {{at::randn({3, 4}), "cuda"}, {at::arange(7).to(at::kInt), "cpu"}, {at::ones({2}, at::kBFloat16), "cpu"},
                  {at::randn({2, 3}).t(), "cpu"}};  // non-contiguous on purpose
  std::thread writer([&] { write_message(p.fds[1], sent); });
  const Message got = read_message(p.fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(10), "test");
  writer.join();
  EXPECT_EQ(got.header, sent.header);
  ASSERT_EQ(got.tensors.size(), sent.tensors.size());
  for (size_t i = 0; i < sent.tensors.size(); ++i) {
    EXPECT_TRUE(at::equal(got.tensors[i].values, sent.tensors[i].values)) << i;
    EXPECT_EQ(got.tensors[i].device, sent.tensors[i].device) << i;
  }
}

TEST(WorkerChannel, ClosedWriterIsChannelClosed) {
  Pipe p;
  p.close_writer();
  EXPECT_THROW(read_message(p.fds[0], std::nullopt, "test"), ChannelClosed);
}

TEST(WorkerChannel, SilentWriterTimesOut) {
  Pipe p;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(read_message(p.fds[0], start + std::chrono::milliseconds(100), "test"), ChannelTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(WorkerChannel, GarbageFrameIsRejected) {
  Pipe p;
  const char garbage[16] = "not a frame....";
  ASSERT_EQ(write(p.fds[1], garbage, sizeof garbage), 16);
  EXPECT_THROW(read_message(p.fds[0], std::nullopt, "test"), InputError);
}

TEST(WorkerChannel, OversizedHeaderIsRejectedBeforeAllocation) {
  Pipe p;
  const uint32_t frame[4] = {0x46524c43, 0xffffffffu, 0, 0};
  ASSERT_EQ(write(p.fds[1], frame, sizeof frame), 16);
  EXPECT_THROW(read_message(p.fds[0], std::nullopt, "test"), InputError);
}

TEST(WorkerChannel, TensorEncodingRoundTripsAndValidates) {
  const ProgramOutput t{at::randn({5, 6}), "cpu"};
  const std::string bytes = encode_tensor(t);
  EXPECT_TRUE(at::equal(decode_tensor(bytes).values, t.values));
  // Truncated data.
  EXPECT_THROW(decode_tensor(bytes.substr(0, bytes.size() - 1)), InputError);
  // Shape that does not match the byte count.
  std::string wrong_shape = bytes;
  const int64_t seven = 7;
  std::memcpy(wrong_shape.data() + 8, &seven, sizeof seven);
  EXPECT_THROW(decode_tensor(wrong_shape), InputError);
  // Negative dimension, unknown dtype, too many dimensions.
  std::string negative = bytes;
  const int64_t minus = -5;
  std::memcpy(negative.data() + 8, &minus, sizeof minus);
  EXPECT_THROW(decode_tensor(negative), InputError);
  std::string bad_dtype = bytes;
  bad_dtype[4] = 99;
  EXPECT_THROW(decode_tensor(bad_dtype), InputError);
  std::string many_dims = bytes;
  many_dims[5] = 9;
  EXPECT_THROW(decode_tensor(many_dims), InputError);
  // A shape whose byte count overflows the limit.
  std::string huge = bytes;
  const int64_t big = int64_t{1} << 40;
  std::memcpy(huge.data() + 8, &big, sizeof big);
  std::memcpy(huge.data() + 16, &big, sizeof big);
  EXPECT_THROW(decode_tensor(huge), InputError);
}

}  // namespace
}  // namespace crl::eval
