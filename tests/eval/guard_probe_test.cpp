// The worker-side guard probes called directly, with simulated candidates on the CPU: work that a
// candidate leaves running when forward returns (a thread standing in for another CUDA stream)
// must be seen by the deferred-work probe, which therefore must not wait for the device first.
#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eval/guard_probe.h"
#include "program/task_spec.h"

namespace crl::eval {
namespace {

TaskSpec relu_spec() {
  return parse_task_spec({true,
                          "task: level1/000_guard_probe\ncategory: test\n"
                          "inputs:\n  - {name: x, shape: [n], dtype: float32, init: randn}\n"
                          "scales:\n  small: {n: 4096}\nflops: 0\nbytes: 0\n",
                          1},
                         "guard_probe_test");
}

std::vector<at::Tensor> relu(const std::vector<at::Tensor>& args) { return {at::relu(args.at(0))}; }

// A candidate whose forward returns an empty output and finishes it on a "device" (a thread) 20 ms
// later; waiting for the device means joining that thread, as a device-wide sync would.
class DeferredCandidate {
 public:
  ~DeferredCandidate() { wait(); }
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& args, bool wait_for_device) {
    at::Tensor y = at::zeros_like(args.at(0));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      device_.emplace_back([x = args.at(0).clone(), y]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        y.copy_(at::relu(x));
      });
    }
    if (wait_for_device) wait();
    return {y};
  }
  void wait() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& t : device_) t.join();
    device_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> device_;
};

const nlohmann::json* find_check(const Message& reply, const std::string& name) {
  for (const auto& check : reply.header.at("checks")) {
    if (check.at("name") == name) return &check;
  }
  return nullptr;
}

// The relu task's one output: 4096 float32 values.
const nlohmann::json kRequest = {{"seeds", {11, 12}}, {"settle_seconds", 0.1}, {"output_bytes", {4096 * 4}}};

TEST(GuardProbe, WorkStillRunningWhenForwardReturnsIsDeferredWork) {
  DeferredCandidate candidate;
  const Message reply = run_guard_probes(
      kRequest, relu_spec(), "small", at::Device(at::kCPU),
      [&](const std::vector<at::Tensor>& args, bool wait) { return candidate(args, wait); });
  const nlohmann::json* check = find_check(reply, "deferred work");
  ASSERT_NE(check, nullptr) << reply.header.dump(2);
  EXPECT_FALSE(check->at("passed").get<bool>()) << check->dump();
  EXPECT_EQ(check->at("kind"), "deferred_work");
}

TEST(GuardProbe, ForwardThatFinishesItsWorkPassesEveryCheck) {
  const Message reply = run_guard_probes(
      kRequest, relu_spec(), "small", at::Device(at::kCPU),
      [](const std::vector<at::Tensor>& args, bool) { return relu(args); });
  for (const auto& check : reply.header.at("checks")) EXPECT_TRUE(check.at("passed").get<bool>()) << check.dump();
  // Three output groups for the judge: same addresses new values, same values new addresses,
  // poisoned free memory.
  EXPECT_EQ(reply.header.at("groups").size(), 3u);
  EXPECT_EQ(reply.tensors.size(), 3u);
}

}  // namespace
}  // namespace crl::eval
