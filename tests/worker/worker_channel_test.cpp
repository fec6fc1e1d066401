// The worker channel: JSON messages survive a pipe; malformed frames are rejected before anything
// they claim is allocated.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "worker/worker_channel.h"

namespace crl::worker {
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

TEST(WorkerChannel, MessageSurvivesAPipe) {
  Pipe p;
  const nlohmann::json sent = {{"op", "run"}, {"seed", 42}, {"slots", {1, 2, 3}}, {"text", std::string(100000, 'x')}};
  std::thread writer([&] { write_message(p.fds[1], sent); });
  const nlohmann::json got = read_message(p.fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(10), "test");
  writer.join();
  EXPECT_EQ(got, sent);
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

TEST(WorkerChannel, OversizedMessageIsRejectedBeforeAllocation) {
  Pipe p;
  const uint32_t frame[2] = {0x4a4c5243, 0xffffffffu};  // "CRLJ", 4 GiB claimed
  ASSERT_EQ(write(p.fds[1], frame, sizeof frame), 8);
  try {
    read_message(p.fds[0], std::nullopt, "test");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds"), std::string::npos) << e.what();
  }
}

TEST(WorkerChannel, FrameThatIsNotJsonIsRejected) {
  Pipe p;
  const char body[] = "{not json";
  const uint32_t frame[2] = {0x4a4c5243, sizeof body - 1};
  ASSERT_EQ(write(p.fds[1], frame, sizeof frame), 8);
  ASSERT_EQ(write(p.fds[1], body, sizeof body - 1), static_cast<ssize_t>(sizeof body - 1));
  EXPECT_THROW(read_message(p.fds[0], std::nullopt, "test"), InputError);
}

TEST(WorkerChannel, AMessageOverTheLimitIsNotSent) {
  Pipe p;
  EXPECT_THROW(write_message(p.fds[1], nlohmann::json(std::string(kMaxMessageBytes + 1, 'x'))), Error);
}

}  // namespace
}  // namespace crl::worker
