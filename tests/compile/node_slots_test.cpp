// The per-node compile budget: slots are exclusive across processes, released when a holder
// exits (even by a crash), and a waiter gets a slot once one is freed.
#include "compile/node_slots.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/error.h"

namespace crl {
namespace {

std::string fresh_dir() {
  char pattern[] = "/tmp/crl-slots-XXXXXX";
  if (mkdtemp(pattern) == nullptr) throw Error("mkdtemp");
  return pattern;
}

TEST(NodeSlots, TwoSlotsAdmitTwoHoldersAndAThirdWaits) {
  const NodeSlots slots(fresh_dir(), 2);
  auto a = std::make_unique<NodeSlots::Hold>(slots);
  NodeSlots::Hold b(slots);
  EXPECT_NE(a->slot(), b.slot());
  EXPECT_EQ(slots.busy(), 2);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    NodeSlots::Hold c(slots);
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(got.load()) << "a third holder got a slot of a full budget";
  a.reset();  // one slot freed: the waiter takes it
  waiter.join();
  EXPECT_TRUE(got.load());
  std::filesystem::remove_all(slots.dir());
}

TEST(NodeSlots, AProcessThatDiesReleasesItsSlot) {
  const NodeSlots slots(fresh_dir(), 1);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    NodeSlots::Hold held(slots);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(slots.busy(), 1);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(slots.busy(), 0);
  NodeSlots::Hold mine(slots);  // does not wait forever
  EXPECT_EQ(mine.slot(), 0);
  close(ready[0]);
  close(ready[1]);
  std::filesystem::remove_all(slots.dir());
}

TEST(NodeSlots, TheBudgetComesFromTheEnvironmentAndIsValidated) {
  setenv("CRL_NODE_COMPILE_SLOTS", "3", 1);
  EXPECT_EQ(default_node_compile_slots(), 3);
  setenv("CRL_NODE_COMPILE_SLOTS", "many", 1);
  EXPECT_THROW(default_node_compile_slots(), InputError);
  unsetenv("CRL_NODE_COMPILE_SLOTS");
  EXPECT_GE(default_node_compile_slots(), 1);
}

}  // namespace
}  // namespace crl
