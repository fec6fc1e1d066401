// Where a step's GPU time goes: runs a step under the Kineto profiler and prints its kernels' time
// per step, summed by kernel name, longest first (to compare with PyTorch's profile of the same work).
#pragma once

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crl::bench {

template <typename Step>
void print_kernel_profile(int steps, Step&& step) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  prof::prepareProfiler(config, activities);
  torch::cuda::synchronize();
  prof::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  torch::cuda::synchronize();
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  std::unordered_map<std::string, std::pair<double, int>> by_name;  // ms per step, launches per step
  double total_ms = 0;
  int launches = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const double ms = static_cast<double>(e.durationNs()) / 1e6 / steps;
    auto& [time, count] = by_name[e.name()];
    time += ms;
    count += 1;
    total_ms += ms;
    ++launches;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::fprintf(stderr, "GPU time per step: %.3f ms in %d kernels (%zu names), in %.3f ms of wall time (profiled)\n",
               total_ms, launches / std::max(steps, 1), rows.size(), wall_ms);
  for (size_t i = 0; i < rows.size() && i < 40; ++i) {
    std::fprintf(stderr, "%9.3f ms %6.1f%% %5d x  %.150s\n", rows[i].second.first, 100 * rows[i].second.first / total_ms,
                 rows[i].second.second / steps, rows[i].first.c_str());
  }
}

}  // namespace crl::bench
