// The checkpoint writer the kill-at-every-write test kills (checkpoint_kill_test.cpp), and its
// checker. `save` writes three checkpoints of the tiny test model under ROOT: step 1 (weights of
// seed 1), step 2 (seed 2), then step 2 again (seed 3: a re-save replaces a step, as after a
// resume), appending "saved <version>" to PROGRESS after each save returns. `check` then asks
// find_latest_checkpoint for the newest good one and checks it is a version the saves that
// returned allow (never a half-written one, never an older one when a newer is whole), that its
// weights, optimiser state and generators load and equal what was saved, and that saving again
// works (the resume).
//   checkpoint_kill_writer save ROOT PROGRESS
//   checkpoint_kill_writer check ROOT PROGRESS      exit 0 and "latest <version>", or 1 and why
#include <torch/torch.h>

#include <cstdio>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s save|check ROOT PROGRESS\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const fs::path root = argv[2], progress = argv[3];
  try {
    if (mode == "check") return check(root, progress);
    for (const auto& v : kVersions) {
      save(root, v);
      std::ofstream(progress, std::ios::app) << "saved " << v.name << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("checkpoint_kill_writer %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
}
