// Issue 40 item 2 diagnostic: what crl's idle probe sees of another process's GPU work, by the
// probe's length and the kind of work. The probe is crl's (lib/worker/idle_probe.cu): one thread
// spinning for L ns of %globaltimer, timed from the host around launch and sync. For each kind of
// work a child process leaves queued (then stops itself with SIGSTOP, as crl freezes a worker), the
// prober takes 40 probes of each length and prints, per length, the idle baseline, the median, p90
// and max, and the share of probes crl's rule calls busy (> 1.5 x baseline + 50 us). One JSON line
// per (work, length).
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {
__global__ void spin_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < nanoseconds);
}
// One thread that sleeps between short spins: a kernel that keeps its context busy while using
// almost no SM time.
__global__ void sleepy_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

double probe_us(uint64_t ns, cudaStream_t s) {
  cudaStreamSynchronize(s);
  const auto t0 = std::chrono::steady_clock::now();
  spin_kernel<<<1, 1, 0, s>>>(ns);
  cudaStreamSynchronize(s);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// The child: queue the named work, tell the parent (by stopping itself), wait to be killed.
int work(const std::string& kind) {
  cudaSetDevice(0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaFree(nullptr);
  if (kind == "one_long_kernel") {
    spin_kernel<<<1, 1, 0, s>>>(20'000'000'000ull);
  } else if (kind == "many_1ms_kernels") {
    for (int i = 0; i < 900; ++i) spin_kernel<<<1, 1, 0, s>>>(1'000'000ull);
  } else if (kind == "many_20us_kernels") {
    for (int i = 0; i < 900; ++i) spin_kernel<<<1, 1, 0, s>>>(20'000ull);
  } else if (kind == "full_gpu_kernel") {
    spin_kernel<<<4096, 256, 0, s>>>(20'000'000'000ull);
  } else if (kind == "sleepy_kernel") {
    sleepy_kernel<<<1, 1, 0, s>>>(20'000'000'000ull);
  } else if (kind == "waiting_on_a_value") {
    // Work held back until a value in memory changes (it never does here): does the context count
    // as busy while its stream waits?
    int* flag = nullptr;
    cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped);
    *flag = 0;
    CUdeviceptr device_flag = 0;
    cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0);
    cuStreamWaitValue32(s, device_flag, 1, CU_STREAM_WAIT_VALUE_EQ);
    spin_kernel<<<1, 1, 0, s>>>(1'000'000ull);
  } else if (kind != "nothing") {
    return 2;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the launches reach the GPU
  raise(SIGSTOP);
  pause();
  return 0;
}

struct Stats { double median, p90, max, busy_share; };
Stats stats(std::vector<double> v, double limit) {
  std::sort(v.begin(), v.end());
  const double busy = static_cast<double>(std::count_if(v.begin(), v.end(), [&](double x) { return x > limit; }));
  return {v[v.size() / 2], v[v.size() * 9 / 10], v.back(), busy / static_cast<double>(v.size())};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "work") return work(argv[2]);
  const std::vector<uint64_t> lengths{100'000, 1'000'000, 4'000'000, 10'000'000};
  const std::vector<std::string> kinds{"nothing", "one_long_kernel", "many_1ms_kernels", "many_20us_kernels",
                                       "full_gpu_kernel", "sleepy_kernel", "waiting_on_a_value"};
  // The children start before this process's CUDA does (fork after CUDA is not allowed).
  std::vector<pid_t> children;
  for (const auto& kind : kinds) {
    const pid_t c = fork();
    if (c == 0) {
      raise(SIGSTOP);  // wait for the turn
      execl("/proc/self/exe", argv[0], "work", kind.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    waitpid(c, &st, WUNTRACED);
    children.push_back(c);
  }
  cudaSetDevice(0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<double> baseline;
  for (const auto ns : lengths) {
    std::vector<double> v;
    for (int i = 0; i < 21; ++i) v.push_back(probe_us(ns, s));
    std::sort(v.begin(), v.end());
    baseline.push_back(v[10]);
  }
  for (size_t k = 0; k < kinds.size(); ++k) {
    int st = 0;
    kill(children[k], SIGCONT);      // it execs and queues its work,
    waitpid(children[k], &st, WUNTRACED);  // then stops itself
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (size_t l = 0; l < lengths.size(); ++l) {
      std::vector<double> v;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 40; ++i) v.push_back(probe_us(lengths[l], s));
      const double span_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const Stats x = stats(v, baseline[l] * 1.5 + 50);
      std::printf("{\"work\": \"%s\", \"probe_us\": %.0f, \"idle_baseline_us\": %.1f, \"median_us\": %.1f, \"p90_us\": %.1f, "
                  "\"max_us\": %.1f, \"busy_share\": %.3f, \"first_us\": %.1f, \"second_us\": %.1f, \"span_ms\": %.1f}\n",
                  kinds[k].c_str(), lengths[l] / 1000.0, baseline[l], x.median, x.p90, x.max, x.busy_share, v[0], v[1], span_ms);
      std::fflush(stdout);
    }
    kill(children[k], SIGKILL);
    waitpid(children[k], &st, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}
