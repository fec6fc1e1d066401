// crl-worker: the processes the evaluator starts to judge a candidate (lib/eval/evaluator.cpp); what
// they run is lib/worker's (the sessions, the protocol, the sandbox), and nothing of the evaluator.
// `crl-worker --channel 3,4 --role judge`: trusted; loads the task's reference only (judge_session.h).
// `crl-worker --channel 3,4 --role candidate --sandbox DIR [--read PATH]...`: loads one candidate
// only, sandboxed before anything else runs (lib/worker/sandbox.h); DIR is the only folder it may
// write, and it reads only its libraries' and the toolchain's folders and the PATHs given.
// Requests arrive on fd 3, replies leave on fd 4; stdout and stderr are the evaluator's log file.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <optional>
#include <vector>

#include "worker/candidate_session.h"
#include "worker/judge_session.h"
#include "worker/page_aligned_allocator.h"
#include "worker/sandbox.h"
#include "worker/worker_channel.h"

using namespace crl::worker;  // NOLINT: this file is the worker module's front door

namespace {

template <typename Session>
int serve(Session& session) {
  for (;;) {
    nlohmann::json request;
    try {
      request = read_message(kRequestFd, std::nullopt, "evaluator");
    } catch (const ChannelClosed&) {
      return 0;  // the evaluator went away: nothing left to do
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crl-worker: unreadable request: %s\n", e.what());
      return 3;
    }
    nlohmann::json reply;
    try {
      if (request_op(request) == Op::quit) return 0;
      reply = session.handle(request);
    } catch (const std::exception& e) {
      ErrorReply error{e.what(), session.poisoned(), is_out_of_memory(e)};
      if (dynamic_cast<const crl::pyprogram::FormatError*>(&e) != nullptr) error.status = "format_error";
      if (dynamic_cast<const crl::pyprogram::ImportError*>(&e) != nullptr) error.status = "compile_error";
      std::string seen;
      if (error.out_of_memory) error.device_short = session.device().device_ran_short(&seen);
      if (!seen.empty()) error.error += " [" + seen + "]";
      reply = encode_error(error);
    }
    try {
      write_message(kReplyFd, reply);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crl-worker: cannot reply: %s\n", e.what());
      return 3;
    }
    if (session.poisoned()) {
      std::fflush(nullptr);
      std::_Exit(4);  // the device is unusable; the evaluator starts a fresh worker
    }
  }
}

}  // namespace

// `crl-worker --probe-cuda [--no-seccomp] [--no-landlock] [--no-late-filter] [--no-read-limit]
// [--keep-capabilities] [--omit GROUP]... [--write DIR]... --sandbox DIR`: applies the whole sandbox
// before CUDA starts (or the parts not turned off; --omit leaves a group of the second filter out,
// --write makes more folders writable), initialises CUDA and says whether it worked; for finding
// which parts a machine's CUDA driver does not start under, and what it writes
// (tools/gpu-measure.sh runs it).
// `crl-worker --probe-cuda --worker-order --sandbox DIR`: the sandbox in a candidate worker's order
// instead (the first filter, CUDA, then the file rules and the second filter) and a computation on
// the GPU after it: whether a candidate worker can work on this machine (`crl doctor` runs it).
int probe_cuda(int argc, char** argv) {
  SandboxPolicy policy;
  bool reads = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-seccomp") == 0) policy.seccomp = false;
    if (std::strcmp(argv[i], "--no-landlock") == 0) policy.landlock = false;
    if (std::strcmp(argv[i], "--no-late-filter") == 0) policy.late_filter = false;
    if (std::strcmp(argv[i], "--no-read-limit") == 0) reads = false;
    if (std::strcmp(argv[i], "--sandbox") == 0 && i + 1 < argc) policy.writable_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--write") == 0 && i + 1 < argc) policy.probe_writable_dirs.push_back(argv[i + 1]);
    if (std::strcmp(argv[i], "--omit") == 0 && i + 1 < argc) policy.probe_filter_omit.push_back(argv[i + 1]);
    if (std::strcmp(argv[i], "--keep-capabilities") == 0) policy.drop_capabilities = false;
  }
  policy.writable_files = default_writable_device_files();
  if (reads) policy.readable_paths = default_readable_paths({});
  bool worker_order = false;
  for (int i = 1; i < argc; ++i) worker_order = worker_order || std::strcmp(argv[i], "--worker-order") == 0;
  try {
    crl::worker::WorkerDevice device;
    if (worker_order) {
      std::printf("before CUDA: %s\n", apply_sandbox_before_device(policy).detail.c_str());
      device.init(crl::worker::DeviceSettings{"cuda", 0, 0});
      std::printf("after CUDA: %s\n", apply_sandbox_after_device(policy, true, device.gpu_minor()).detail.c_str());
      const std::string computed = device.self_check();
      std::printf("probe-cuda: a candidate worker's sandbox works here (%s)\n", computed.c_str());
      return 0;
    }
    const auto report = apply_sandbox(policy);
    std::printf("%s\n", report.detail.c_str());
    device.init(crl::worker::DeviceSettings{"cuda", 0, 0});
    std::printf("probe-cuda: CUDA works in this sandbox\n");
    return 0;
  } catch (const std::exception& e) {
    std::printf("probe-cuda: failed: %.300s\n", e.what());
    return 1;
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--probe-cuda") == 0) return probe_cuda(argc, argv);
  std::string role;
  std::string sandbox_dir;
  std::vector<std::string> readable;
  bool channel = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--channel") == 0 && std::strcmp(argv[i + 1], "3,4") == 0) channel = true;
    if (std::strcmp(argv[i], "--role") == 0) role = argv[i + 1];
    if (std::strcmp(argv[i], "--sandbox") == 0) sandbox_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--read") == 0) readable.push_back(argv[i + 1]);
  }
  if (!channel || (role != "judge" && role != "candidate")) {
    std::fprintf(stderr,
                 "crl-worker runs programs for the crl evaluator and is started only by it "
                 "(usage: crl-worker --channel 3,4 --role judge|candidate [--sandbox DIR])\n");
    return 2;
  }
  // Every worker's allocator in one fixed state, whatever it ran before: glibc's dynamic thresholds
  // would otherwise move with each process's history (a freed mmap raises the mmap threshold, the
  // trim threshold follows), so the reference's timing worker, which ran only a warm-up batch, and
  // a candidate's worker, which ran trials and guards, served the same outputs one from fresh
  // mmapped pages and the other from warm heap pages.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  // And where a large block starts within its page, whatever the history (page_aligned_allocator.h).
  crl::worker::use_page_aligned_cpu_allocator();
  // The evaluator starts workers with a clean environment; a preloaded or audited library could
  // still interpose on the worker's calls, so a worker that finds one refuses to run.
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT"}) {
    if (const char* value = std::getenv(name); value != nullptr && value[0] != '\0') {
      std::fprintf(stderr, "crl-worker: refusing to run with %s=%s\n", name, value);
      return 2;
    }
  }
  if (role == "judge") {
    crl::worker::JudgeSession session;
    return serve(session);
  }
  // The first system-call filter and the capability drop before anything runs (capabilities are
  // each thread's: CUDA's and LibTorch's threads, started later, inherit none); the file rules and
  // the second filter once the device is set up (CandidateSession::load, before the candidate's
  // library is loaded): the H200's CUDA driver fails to initialise under either (error 304), and
  // threads it started before keep their file rights (the second filter reaches them: TSYNC).
  SandboxPolicy policy;
  policy.writable_dir = sandbox_dir;
  if (!sandbox_dir.empty()) {
    try {
      const auto report = apply_sandbox_before_device(policy);
      std::fprintf(stderr, "crl-worker: %s\n", report.detail.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crl-worker: %s\n", e.what());
      return 5;
    }
    policy.readable_paths = default_readable_paths(readable);
  }
  crl::worker::CandidateSession session(sandbox_dir.empty() ? std::nullopt : std::optional<SandboxPolicy>(policy));
  return serve(session);
}
