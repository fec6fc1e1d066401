// The checkpoint writer the kill-at-every-write test kills (checkpoint_kill_test.cpp), and its
// checker. `save` writes three checkpoints of the tiny test model under ROOT: step 1 (weights of
// seed 1), step 2 (seed 2), then step 2 again (seed 3: a re-save replaces a step, as after a
// resume), appending "saved <version>" to PROGRESS after each save returns. `check` then asks
// find_latest_checkpoint for the newest good one and checks it is a version the saves that
// returned allow (never a half-written one, never an older one when a newer is whole), that its
// weights, optimiser state and generators load and equal what was saved, and that saving again
// works (the resume).
// `kill-each` does both for every kill point in one process that forks a child per save and per
// check (kill_shim's crl_kill_shim_rearm arms each child; two process starts a point cost more CPU
// than the saves, 0.8 s of LibTorch loading against 186 points): roots KILL_DIR/<n>, progress and
// logs in WORK; it prints "kill points N", a "kill point <n>: why" line per failure, "failures F".
//   checkpoint_kill_writer save ROOT PROGRESS
//   checkpoint_kill_writer check ROOT PROGRESS      exit 0 and "latest <version>", or 1 and why
//   checkpoint_kill_writer kill-each KILL_DIR WORK  (under kill_shim, CRL_KILL_DIR=KILL_DIR)
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "policy/checkpoint.h"
#include "policy/config.h"
#include "policy/model.h"

namespace {

using namespace crl::policy;
namespace fs = std::filesystem;

// One state tensor, enough for save and load to go through the optimiser's path.
class StepCounter : public OptimizerState {
 public:
  explicit StepCounter(double step) : step_(torch::full({1}, step)) {}
  std::vector<std::pair<std::string, torch::Tensor>> state_tensors() const override { return {{"step", step_}}; }
  void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) override {
    const auto it = tensors.find("step");
    if (it == tensors.end()) throw std::runtime_error(origin + ": no step");
    step_ = it->second.clone();
  }
  double value() const { return step_.item<double>(); }

 private:
  torch::Tensor step_;
};

struct Version {
  std::string name;
  int64_t step;
  uint64_t seed;
};
const Version kVersions[] = {{"1", 1, 1}, {"2", 2, 2}, {"2b", 2, 3}};

CausalLm model_of(uint64_t seed) {
  CausalLm model(load_model_config(fs::path(CRL_TEST_DATA_DIR) / "policy" / "models" / "qwen2_gqa2_tied"));
  init_weights(model, seed);
  return model;
}

fs::path save(const fs::path& root, const Version& v) {
  const CausalLm model = model_of(v.seed);
  const StepCounter optimizer(static_cast<double>(v.seed));
  CheckpointContents c;
  c.model = &model;
  c.optimizer = &optimizer;
  c.step = v.step;
  c.user_state = {{"version", v.name}};
  return save_checkpoint(root, c);
}

std::string last_saved(const fs::path& progress) {
  std::ifstream in(progress);
  std::string word, version, last;
  while (in >> word >> version) last = version;
  return last;
}

int check(const fs::path& root, const fs::path& progress) {
  // What find_latest_checkpoint may return after the saves that returned: the last of them, or
  // the one that was being saved (its rename done, its return not).
  const std::map<std::string, std::set<std::string>> allowed = {
      {"", {"", "1"}}, {"1", {"1", "2"}}, {"2", {"2", "2b"}}, {"2b", {"2b"}}};
  const std::string saved = last_saved(progress);
  const auto dir = find_latest_checkpoint(root);
  std::string version;
  if (dir) version = read_checkpoint_state(*dir).user_state.at("version").get<std::string>();
  if (!allowed.at(saved).contains(version)) {
    std::printf("after the saves up to '%s' returned, the newest good checkpoint is '%s' (%s)\n", saved.c_str(),
                version.c_str(), dir ? dir->c_str() : "none");
    return 1;
  }
  if (dir) {
    uint64_t seed = 0;
    for (const auto& v : kVersions) {
      if (v.name == version) seed = v.seed;
    }
    CausalLm loaded = model_of(99);
    load_checkpoint_weights(*dir, loaded, nullptr);
    const CausalLm expected = model_of(seed);
    const auto want = state_tensors(expected), got = state_tensors(loaded);
    for (size_t i = 0; i < want.size(); ++i) {
      if (!torch::equal(want[i].second, got[i].second)) {
        std::printf("checkpoint %s: %s differs from what was saved\n", dir->c_str(), want[i].first.c_str());
        return 1;
      }
    }
    StepCounter optimizer(0);
    load_checkpoint_optimizer(*dir, optimizer);
    if (optimizer.value() != static_cast<double>(seed)) {
      std::printf("checkpoint %s: optimiser state differs\n", dir->c_str());
      return 1;
    }
    load_checkpoint_generators(*dir, 0);
  }
  // The resume: saving again works beside whatever the kill left, and is the newest.
  const fs::path next = save(root, {"3", 3, 4});
  if (find_latest_checkpoint(root) != next) {
    std::printf("a save after the kill (%s) is not the newest good checkpoint\n", next.c_str());
    return 1;
  }
  std::printf("latest %s\n", version.empty() ? "none" : version.c_str());
  return 0;
}

void save_all(const fs::path& root, const fs::path& progress) {
  for (const auto& v : kVersions) {
    save(root, v);
    std::ofstream(progress, std::ios::app) << "saved " << v.name << "\n";
  }
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `body` in a forked child whose shim is re-armed to die at its `kill_at`-th kill point (-1:
// never), its output into `log`; returns the child's wait status.
int in_child(long kill_at, const fs::path& log, const std::function<int()>& body) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, STDOUT_FILENO);
    ::setenv("CRL_KILL_AT", std::to_string(kill_at).c_str(), 1);
    reinterpret_cast<void (*)()>(::dlsym(RTLD_DEFAULT, "crl_kill_shim_rearm"))();
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::printf("%s\n", e.what());
    }
    std::fflush(stdout);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

int kill_each(const fs::path& kill_dir, const fs::path& work) {
  const auto count = reinterpret_cast<long (*)()>(::dlsym(RTLD_DEFAULT, "crl_kill_shim_count"));
  if (::dlsym(RTLD_DEFAULT, "crl_kill_shim_rearm") == nullptr || count == nullptr) {
    std::printf("kill-each needs kill_shim preloaded (LD_PRELOAD) with CRL_KILL_DIR=%s\n", kill_dir.c_str());
    return 2;
  }
  // The roots are made here, not in the children, so that making one is not a kill point.
  fs::create_directories(work);
  fs::create_directories(kill_dir / "count");
  const int counted = in_child(0, work / "count.log", [&] {
    save_all(kill_dir / "count", work / "count.progress");
    std::ofstream(work / "count") << count() << "\n";
    return 0;
  });
  if (!WIFEXITED(counted) || WEXITSTATUS(counted) != 0) {
    std::printf("the counting run failed: %s\n", read_text(work / "count.log").c_str());
    return 1;
  }
  const long points = std::stol(read_text(work / "count"));
  std::printf("kill points %ld\n", points);
  int failures = 0;
  for (long n = 1; n <= points; ++n) {
    const fs::path root = kill_dir / std::to_string(n), progress = work / (std::to_string(n) + ".progress");
    const fs::path save_log = work / (std::to_string(n) + ".save.log"), check_log = work / (std::to_string(n) + ".check.log");
    fs::create_directories(root);
    const int killed = in_child(n, save_log, [&] {
      save_all(root, progress);
      return 0;
    });
    if (!WIFSIGNALED(killed) || WTERMSIG(killed) != SIGKILL) {
      std::printf("kill point %ld: not killed (wait status %d): %s\n", n, killed, read_text(save_log).c_str());
      ++failures;
      continue;
    }
    const int checked = in_child(-1, check_log, [&] { return check(root, progress); });
    if (!WIFEXITED(checked) || WEXITSTATUS(checked) != 0) {
      std::printf("kill point %ld: %s\n", n, read_text(check_log).c_str());
      ++failures;
    }
  }
  std::printf("failures %d\n", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s save|check ROOT PROGRESS | kill-each KILL_DIR WORK\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const fs::path root = argv[2], progress = argv[3];
  try {
    if (mode == "check") return check(root, progress);
    if (mode == "kill-each") return kill_each(root, progress);
    save_all(root, progress);
    return 0;
  } catch (const std::exception& e) {
    std::printf("checkpoint_kill_writer %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
}
