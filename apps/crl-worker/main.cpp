// crl-worker: the processes the evaluator starts to judge a candidate (lib/eval/evaluator.cpp).
// `crl-worker --channel 3,4 --role judge`: trusted; loads the task's reference only (judge_session.h).
// `crl-worker --channel 3,4 --role candidate --sandbox DIR [--read PATH]...`: loads one candidate
// only, sandboxed before anything else runs (lib/eval/sandbox.h); DIR is the only folder it may
// write, and it reads only its libraries' and the toolchain's folders and the PATHs given.
// Requests arrive on fd 3, replies leave on fd 4; stdout and stderr are the evaluator's log file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/crl-worker/candidate_session.h"
#include "apps/crl-worker/judge_session.h"
#include "eval/sandbox.h"

namespace {

template <typename Session>
int serve(Session& session) {
  using namespace crl::worker;
  for (;;) {
    crl::eval::Message request;
    try {
      request = crl::eval::read_message(kRequestFd, std::nullopt, "evaluator");
    } catch (const crl::eval::ChannelClosed&) {
      return 0;  // the evaluator went away: nothing left to do
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crl-worker: unreadable request: %s\n", e.what());
      return 3;
    }
    if (request.header.value("op", "") == "quit") return 0;
    crl::eval::Message reply;
    try {
      reply = session.handle(request);
      reply.header["ok"] = true;
    } catch (const std::exception& e) {
      reply = crl::eval::Message{{{"ok", false}, {"error", e.what()}, {"sticky", session.poisoned()}}, {}};
    }
    try {
      crl::eval::write_message(kReplyFd, reply);
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

int main(int argc, char** argv) {
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
  if (!sandbox_dir.empty()) {
    try {
      crl::eval::SandboxPolicy policy;
      policy.writable_dir = sandbox_dir;
      policy.writable_files = crl::eval::default_writable_device_files();
      policy.readable_paths = crl::eval::default_readable_paths(readable);
      const auto report = crl::eval::apply_sandbox(policy);
      std::fprintf(stderr, "crl-worker: %s\n", report.detail.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crl-worker: %s\n", e.what());
      return 5;
    }
  }
  crl::worker::CandidateSession session;
  return serve(session);
}
