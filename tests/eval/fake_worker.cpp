// A stand-in for crl-worker in sandbox tests: speaks the channel protocol and misbehaves on
// request (crash, hang, exit, flood its log), so WorkerProcess can be tested without programs.
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "worker/worker_channel.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "--channel") return 2;
  for (;;) {
    nlohmann::json request;
    try {
      request = crl::worker::read_message(3, std::nullopt, "evaluator");
    } catch (const crl::worker::ChannelClosed&) {
      return 0;
    }
    const std::string op = request.value("op", "");
    nlohmann::json reply = {{"ok", true}};
    if (op == "quit") return 0;
    if (op == "echo") {
      reply["echo"] = request;
    } else if (op == "segfault") {
      std::printf("about to crash\n");
      std::fflush(stdout);
      raise(SIGSEGV);
    } else if (op == "hang") {
      // A child in the same group hangs too: the evaluator must kill the whole group.
      if (fork() == 0) {
        for (;;) pause();
      }
      for (;;) pause();
    } else if (op == "exit") {
      std::_Exit(7);
    } else if (op == "flood") {
      const std::string line(1024, 'x');
      for (;;) std::fprintf(stdout, "%s\n", line.c_str());
    } else if (op == "inspect") {
      nlohmann::json env = nlohmann::json::object();
      for (char** e = environ; *e != nullptr; ++e) {
        const std::string kv = *e;
        env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
      }
      int open_fds = 0;
      if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* entry = readdir(d)) open_fds += entry->d_name[0] != '.';
        closedir(d);
      }
      rlimit as{};
      getrlimit(RLIMIT_AS, &as);
      reply["env"] = env;
      reply["open_fds"] = open_fds - 1;  // less the one opendir itself holds
      reply["rlimit_as"] = as.rlim_cur == RLIM_INFINITY ? 0 : static_cast<uint64_t>(as.rlim_cur);
      reply["pgid_is_pid"] = getpgrp() == getpid();
    } else if (op == "garbage") {
      const char junk[32] = "this is not a protocol frame..";
      if (write(4, junk, sizeof junk) < 0) return 3;
      continue;
    }
    crl::worker::write_message(4, reply);
    if (op == "spin_after_reply") {
      // One thread computing on after its reply (a worker finishing its reply's work while the
      // evaluator has not yet frozen it): CPU time outside the evaluator's round trip.
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(request.value("ms", 0));
      while (std::chrono::steady_clock::now() < until) {
      }
    }
  }
}
