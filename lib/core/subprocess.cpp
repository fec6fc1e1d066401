// fork/exec with a merged output pipe, poll-based timeout and process-group kill.
#include "core/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/landlock.h"

extern char** environ;

namespace crl {

std::string find_on_path(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

CommandResult run_command(const std::vector<std::string>& argv, const CommandOptions& options) {
  CommandResult result;
  if (argv.empty()) throw Error("run_command: empty command line");
  const std::string exe = find_on_path(argv[0]);
  if (exe.empty()) {
    result.output = "command not found: " + argv[0];
    return result;
  }
  // Build argv/envp before fork: only async-signal-safe calls are allowed in the child.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos && options.env.count(kv.substr(0, eq)) != 0) continue;
    env_strings.push_back(kv);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_api_error("OS", "pipe2", std::strerror(errno), __FILE__, __LINE__);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw_api_error("OS", "fork", std::strerror(errno), __FILE__, __LINE__);
  }
  if (pid == 0) {
    setpgid(0, 0);
    // A job's stop signal (Slurm's scancel --signal reaches every process of the step) must not
    // kill a compile mid-step: the caller ends its children itself (timeouts kill the group).
    signal(SIGUSR1, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) _exit(127);
    if (options.landlock_ruleset >= 0 && restrict_to_landlock_ruleset(options.landlock_ruleset) != 0) {
      static const char message[] = "crl: could not restrict this command to its Landlock ruleset\n";
      (void)!write(STDOUT_FILENO, message, sizeof message - 1);
      _exit(126);
    }
    execve(exe.c_str(), args.data(), envp.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so a kill cannot race the child's own setpgid
  close(fds[1]);

  const auto deadline = start + options.timeout;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: every writer (the child and anything it left behind) is gone
    if (result.output.size() < options.max_output) {
      result.output.append(buf, std::min<size_t>(static_cast<size_t>(n), options.max_output - result.output.size()));
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Children the program left running in its group (e.g. a daemonised compiler) go too.
  kill(-pid, SIGKILL);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace crl
