// The built-in default job behind a bare `crl run` (default_job.h): tiny model, mpirun, report.
#include "apps/crl/default_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "apps/crl/commands.h"
#include "apps/crl/job_launch.h"
#include "core/error.h"
#include "core/process_env.h"
#include "core/subprocess.h"
#include "core/yaml_file.h"
#include "machine/machine_probe.h"
#include "policy/init_model.h"
#include "results/results_reader.h"
#include "rl/sft_data.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

namespace fs = std::filesystem;

// The tiny model: big enough to memorise the seed programs, small enough to train on two cores.
// Hidden 256 (1.7 M parameters): at 128 the loss on the default's 12 SFT programs stalled near 4
// after 45 steps, at 256 it reached 1.2 in the same steps and 0.02 after 144 steps of batch 2.
policy::InitModelOptions tiny_model_options(const fs::path& out_dir, const fs::path& corpus) {
  policy::InitModelOptions o;
  o.out_dir = out_dir;
  o.corpus = corpus;
  o.vocab_size = 2048;
  o.hidden_size = 256;
  o.intermediate_size = 512;  // Qwen2's 5.4 x would triple the compute for little gain here
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = 2;
  o.max_position_embeddings = 4096;
  o.seed = 1;
  return o;
}

// The tokenizer's corpus: every program of the suite and every completion of the seed data, so
// that the programs the job reads and writes take few tokens.
void write_tokenizer_corpus(const fs::path& path, const fs::path& seed_dir) {
  std::ostringstream corpus;
  const Suite suite = Suite::load(resolve_suite_dir());
  for (const Task& task : suite.tasks()) corpus << task.text << "\n";
  for (const char* name : {"cpu_raw.jsonl", "cuda.jsonl"}) {
    if (!fs::exists(seed_dir / name)) continue;
    for (const rl::SftExample& e : rl::read_sft_jsonl((seed_dir / name).string())) corpus << e.completion << "\n";
  }
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << corpus.str();
  if (!out) throw Error(fmt::format("{}: cannot write the tokenizer corpus", path.string()));
}

// Stage 3's reward: the mean over its first and last steps (a quarter of them, at least one).
struct RewardRise {
  int64_t steps = 0;
  int64_t window = 0;
  double first = 0, last = 0;
};

RewardRise crl_reward_rise(const std::string& results_path) {
  const results::ResultsReader reader(results_path);
  const auto stage = reader.column_as<std::string>("steps", "stage");
  const auto reward = reader.column_as<double>("steps", "reward_mean");
  std::vector<double> crl;
  for (size_t i = 0; i < stage.size() && i < reward.size(); ++i) {
    if (stage[i] == "crl") crl.push_back(reward[i]);
  }
  RewardRise r;
  r.steps = static_cast<int64_t>(crl.size());
  if (crl.empty()) return r;
  r.window = std::max<int64_t>(1, r.steps / 4);
  const auto w = static_cast<std::ptrdiff_t>(r.window);
  r.first = std::accumulate(crl.begin(), crl.begin() + w, 0.0) / static_cast<double>(w);
  r.last = std::accumulate(crl.end() - w, crl.end(), 0.0) / static_cast<double>(w);
  return r;
}

// The parts of a --set key, in either form a user types: `stages.1.steps` or `stages[1].steps`
// (the form every message of the job file prints, job_config.h).
std::vector<std::string> key_parts(const std::string& key, const std::string& item) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '.') {
      parts.emplace_back();
    } else if (key[i] == '[') {
      const size_t close = key.find(']', i);
      const std::string index = close == std::string::npos ? "" : key.substr(i + 1, close - i - 1);
      const bool next_ok = close != std::string::npos && (close + 1 == key.size() || key[close + 1] == '.' || key[close + 1] == '[');
      if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || !next_ok || parts.back().empty()) {
        throw InputError(fmt::format("--set {}: '[' must follow a key and hold a list index, e.g. --set stages[1].steps=6", item));
      }
      parts.push_back(index);
      i = close;
      if (close + 1 < key.size() && key[close + 1] == '.') ++i;  // "[1].steps": the dot only separates
      if (i + 1 < key.size()) parts.emplace_back();
    } else {
      parts.back() += key[i];
    }
  }
  return parts;
}

// The first `n` parts as the job file's messages print a key: list indices in brackets.
std::string key_text(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) {
    const bool index = !parts[i].empty() && parts[i].find_first_not_of("0123456789") == std::string::npos && i > 0;
    out += index ? "[" + parts[i] + "]" : (i > 0 ? "." : "") + parts[i];
  }
  return out;
}

}  // namespace

std::string default_job_path() { return std::string(CRL_SOURCE_DIR) + "/jobs/default.yaml"; }

std::string apply_job_overrides(const std::string& text, const std::string& origin, const std::vector<std::string>& overrides) {
  if (overrides.empty()) return text;
  YAML::Node root = parse_yaml(text, origin);
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InputError(fmt::format("--set {}: expected KEY=VALUE, e.g. --set stages[2].steps=6", item));
    }
    const std::vector<std::string> path = key_parts(item.substr(0, eq), item);
    YAML::Node value;
    try {
      value = YAML::Load(item.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("--set {}: the value is not YAML: {}", item, e.what()));
    }
    check_yaml_expansion(value, fmt::format("--set {}", item));
    YAML::Node node;
    node.reset(root);
    for (size_t i = 0; i < path.size(); ++i) {
      const std::string& key = path[i];
      const bool leaf = i + 1 == path.size();
      if (key.empty()) throw InputError(fmt::format("--set {}: an empty key", item));
      if (node.IsSequence()) {
        size_t index = 0;
        if (key.find_first_not_of("0123456789") != std::string::npos || (index = std::stoul(key)) >= node.size()) {
          throw InputError(fmt::format("--set {}: {}[{}]: the index must be below {} ({} is a list of {})", item, key_text(path, i),
                                       key, node.size(), key_text(path, i), node.size()));
        }
        if (leaf) {
          node[index] = value;
        } else {
          YAML::Node next = node[index];
          node.reset(next);
        }
      } else if (node.IsMap()) {
        if (leaf) {
          node[key] = value;
        } else {
          if (!node[key]) throw InputError(fmt::format("--set {}: {} has no key '{}'", item, origin, key_text(path, i + 1)));
          YAML::Node next = node[key];
          node.reset(next);
        }
      } else {
        throw InputError(fmt::format("--set {}: '{}' is not a map or a list in {}", item, key_text(path, i), origin));
      }
    }
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

int run_default_job(const DefaultRunOptions& options, const std::string& self) {
  if (!launch_place().launcher.empty()) {
    throw InputError(fmt::format(
        "crl run without a job file starts mpirun itself; under {} give the job file: crl run {} --model DIR --run-dir DIR",
        launch_place().launcher, default_job_path()));
  }
  if (options.ranks < 2) throw InputError(fmt::format("--ranks is {}: the job needs a trainer and at least one evaluator", options.ranks));
  const fs::path job = default_job_path();
  const fs::path run_dir = fs::absolute(options.run_dir);
  fs::create_directories(run_dir);

  // 1. The model: the given checkpoint, the run folder's, or a new tiny one.
  fs::path model = options.model.empty() ? run_dir / "model" : fs::absolute(options.model);
  if (options.model.empty() && !fs::exists(model / "config.json")) {
    const fs::path corpus = run_dir / "tokenizer_corpus.txt";
    write_tokenizer_corpus(corpus, job.parent_path() / "data" / "seed");
    spdlog::info("making a tiny Qwen2-style model in {} (tokenizer trained on the suite and the seed data)", model.string());
    const auto made = policy::init_model(tiny_model_options(model, corpus));
    spdlog::info("model: {} layers, hidden {}, vocabulary {}, {:.2f} M parameters", made.config.num_hidden_layers,
                 made.config.hidden_size, made.config.vocab_size, made.parameters / 1e6);
  }

  // 2. The machine: on a GPU the job uses it (one GPU shared by the trainer and the evaluators
  // when there are fewer GPUs than ranks) and trains on the seed programs that run there.
  std::vector<std::string> overrides;
  if (cuda_device_visible()) {
    const size_t gpus = probe_machine().gpus.size();
    overrides = {"backend=cuda", "stages.0.data=data/seed/cuda_default.jsonl"};
    if (gpus < static_cast<size_t>(options.ranks)) overrides.push_back("share_gpu=true");
    spdlog::info("{} GPU(s) visible: the default job runs on the CUDA backend", gpus);
  }
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());

  // 3. The job under mpirun (job_launch.h: a Ctrl-C stops it with a checkpoint): 1 trainer, the
  // other ranks evaluate.
  MpirunLaunch launch{self, options.ranks, {"run", job.string(), "--model", model.string(), "--run-dir", run_dir.string()}};
  for (const std::string& o : overrides) {
    launch.args.push_back("--set");
    launch.args.push_back(o);
  }
  const int code = run_under_mpirun(launch);
  if (code == 5) {
    spdlog::warn("stopped; run the same command to resume");
    return code;
  }
  if (code != 0) {
    spdlog::error("the default job failed (exit {}); its log is above", code);
    return code;
  }

  // 4. The figure the default exists to show (first: it needs no report), then the report.
  const fs::path results = run_dir / "results.h5";
  const fs::path report = run_dir / "report";
  const RewardRise rise = crl_reward_rise(results.string());
  if (rise.steps > 0) {
    spdlog::info("stage 3 (contrastive RL), {} steps: mean reward {:.3f} over its first {} step(s), {:.3f} over its last {}",
                 rise.steps, rise.first, rise.window, rise.last, rise.window);
  }
  spdlog::info("the job is done; crl report {} --out {}", results.string(), report.string());
  const CommandResult r = run_command({self, "report", results.string(), "--out", report.string()}, {.timeout = std::chrono::minutes(10)});
  if (!r.ok()) {
    spdlog::error("crl report failed (exit {}); the results are in {}:\n{}", r.exit_code, results.string(), r.output);
    return r.exit_code > 0 ? r.exit_code : kExitInternal;
  }
  std::cout << fmt::format("results: {}\nreport:  {}\n", results.string(), (report / "index.html").string()) << std::flush;
  return kExitOk;
}

}  // namespace crl::cli
