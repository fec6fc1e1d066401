// Tensor descriptions across processes: validation of what a worker claims, arena layouts, shared
// memory, and reading a stopped child's memory (how the evaluator fetches CPU outputs).
#include "worker/exchange.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace crl::worker {
namespace {

TEST(TensorRefJson, RoundTripsAndRefusesWhatItCannotBound) {
  TensorRef ref;
  ref.meta = {{4, 16}, at::kFloat};
  ref.device = "cpu";
  ref.address = 4096;
  const TensorRef back = tensor_ref_from_json(to_json(ref));
  EXPECT_EQ(back.meta, ref.meta);
  EXPECT_EQ(back.address, 4096u);
  EXPECT_EQ(back.meta.nbytes(), 256);
  EXPECT_THROW(tensor_ref_from_json({{"sizes", {int64_t{1} << 30, int64_t{1} << 30}}, {"dtype", "float"}, {"device", "cpu"}, {"address", 1}}),
               InputError);
  EXPECT_THROW(tensor_ref_from_json({{"sizes", {-1}}, {"dtype", "float"}, {"device", "cpu"}, {"address", 1}}), InputError);
  EXPECT_THROW(tensor_ref_from_json({{"sizes", {1}}, {"dtype", "complex"}, {"device", "cpu"}, {"address", 1}}), InputError);
  EXPECT_THROW(tensor_ref_from_json({{"sizes", {1}}, {"dtype", "float"}, {"device", "tpu"}}), InputError);
  EXPECT_THROW(tensor_ref_from_json({{"sizes", {1}}, {"dtype", "float"}, {"device", "cuda"}, {"offset", 0}}), InputError);
  EXPECT_THROW(tensor_refs_from_json(nlohmann::json::array({to_json(ref), to_json(ref)}), 1), InputError);
}

TEST(ArenaLayout, AlignsEveryArgumentAndSharesOneSlotSize) {
  const ArenaLayout layout = arena_layout({{{3}, at::kFloat}, {{}, at::kLong}, {{10, 10}, at::kHalf}}, 4);
  ASSERT_EQ(layout.offsets.size(), 3u);
  EXPECT_EQ(layout.offsets[0], 0u);
  EXPECT_EQ(layout.offsets[1], 256u);
  EXPECT_EQ(layout.offsets[2], 512u);
  EXPECT_EQ(layout.slot_bytes, 768u);
  EXPECT_EQ(layout.total_bytes(), 4 * 768u);
  const ArenaLayout back = arena_layout_from_json(to_json(layout));
  EXPECT_EQ(back.slot_bytes, layout.slot_bytes);
  EXPECT_THROW(arena_layout_from_json({{"arguments", nlohmann::json::array()}, {"slots", 0}}), InputError);
}

TEST(SharedMemory, AChildSeesWhatTheParentWritesInTheArena) {
  const ArenaLayout layout = arena_layout({{{8}, at::kFloat}}, 2);
  const int fd = create_shared_memory("crl-test-arena", layout.total_bytes());
  void* base = map_shared_memory(fd, layout.total_bytes(), "test arena");
  arena_arguments(base, layout, 1, at::Device(at::kCPU))[0].fill_(3.5);
  const pid_t pid = fork();
  if (pid == 0) {
    void* child = map_shared_memory(fd, layout.total_bytes(), "test arena");
    const auto args = arena_arguments(child, layout, 1, at::Device(at::kCPU));
    _exit(args[0].eq(3.5).all().item<bool>() ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THROW(arena_arguments(base, layout, 2, at::Device(at::kCPU)), InputError);
  unmap_shared_memory(base, layout.total_bytes());
  close(fd);
}

TEST(SharedMemory, ASealedArenaCannotBeResizedByWhoeverHoldsIt) {
  const int fd = create_shared_memory("crl-test-sealed", 0);
  size_and_seal_shared_memory(fd, 4096, "test arena");
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 4096);
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd, 8192), 0);
  EXPECT_EQ(errno, EPERM);
  // Writes within its size still work: the judge fills it.
  void* base = map_shared_memory(fd, 4096, "test arena");
  static_cast<char*>(base)[4095] = 7;
  unmap_shared_memory(base, 4096);
  close(fd);
}

TEST(ReadProcessMemory, CopiesFromAStoppedChildAndRefusesUnmappedRanges) {
  static char message[64] = "written by the child before it stopped";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::strcpy(message, "the child's own value, not the parent's");
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  kill(pid, SIGSTOP);
  int status = 0;
  waitpid(pid, &status, WUNTRACED);
  char copy[64] = {};
  read_process_memory(pid, reinterpret_cast<uint64_t>(message), sizeof copy, copy);
  EXPECT_STREQ(copy, "the child's own value, not the parent's");
  EXPECT_THROW(read_process_memory(pid, 16, 64, copy), InputError);  // the zero page is never mapped
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace crl::worker
