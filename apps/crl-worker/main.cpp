// crl-worker: the sandboxed process that loads and runs programs for the evaluator.
// Started only by the evaluator (lib/eval/worker_process.cpp) as `crl-worker --channel 3,4`:
// requests arrive on fd 3, replies leave on fd 4; stdout and stderr are the evaluator's log file.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "apps/crl-worker/worker_session.h"

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "--channel") != 0 || std::strcmp(argv[2], "3,4") != 0) {
    std::fprintf(stderr,
                 "crl-worker runs programs for the crl evaluator and is started only by it "
                 "(usage: crl-worker --channel 3,4)\n");
    return 2;
  }
  // The evaluator starts workers with a clean environment; a preloaded or audited library could
  // still interpose the timer, so a worker that finds one refuses to run (hack guard).
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT"}) {
    if (const char* value = std::getenv(name); value != nullptr && value[0] != '\0') {
      std::fprintf(stderr, "crl-worker: refusing to run with %s=%s\n", name, value);
      return 2;
    }
  }
  constexpr int kRequestFd = 3;
  constexpr int kReplyFd = 4;
  crl::worker::WorkerSession session;
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
