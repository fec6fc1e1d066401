// Reading and validating `crl run` job files (keys and defaults: jobs/README.md).
#include "rl/job_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/read_file.h"
#include "core/yaml_file.h"

namespace crl::rl {
namespace {

namespace fs = std::filesystem;

// A mapping of the job file being read, with the dotted key path that leads to it, so that
// every error names the file, the line and the full key ("stages[1].sampling.top_p").
class Section {
 public:
  Section(YAML::Node node, std::string path, const std::string& origin, std::set<std::string> known)
      : node_(std::move(node)), path_(std::move(path)), origin_(origin) {
    if (!node_.IsMap()) fail(node_, "must be a mapping");
    for (const auto& item : node_) {
      const std::string key = item.first.as<std::string>();
      if (!seen_.insert(key).second) fail(item.first, fmt::format("key '{}' appears twice", key));
      if (!known.contains(key)) {
        fail(item.first, fmt::format("unknown key '{}' (known keys here: {})", key_path(key), fmt::join(known, ", ")));
      }
    }
  }

  bool has(const std::string& key) const { return static_cast<bool>(node_[key]); }
  YAML::Node child(const std::string& key) const { return node_[key]; }
  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& origin() const { return origin_; }

  template <typename T>
  T get(const std::string& key, const T& fallback) const {
    const YAML::Node v = node_[key];
    if (!v) return fallback;
    if (!v.IsScalar()) fail(v, fmt::format("'{}' must be a single value", key_path(key)));
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(v, fmt::format("'{}' has the wrong type (value '{}')", key_path(key), YAML::Dump(v)));
    }
  }
  template <typename T>
  T required(const std::string& key) const {
    if (!has(key)) fail(node_, fmt::format("missing key '{}'", key_path(key)));
    return get<T>(key, T{});
  }
  // A number within [lo, hi].
  template <typename T>
  T number(const std::string& key, T fallback, T lo, T hi) const {
    const T v = get<T>(key, fallback);
    if (!(v >= lo && v <= hi)) {
      fail(node_[key], fmt::format("'{}' is {}; it must be within [{}, {}]", key_path(key), v, lo, hi));
    }
    return v;
  }
  // One of `choices`.
  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices) const {
    const std::string v = get<std::string>(key, fallback);
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      fail(node_[key], fmt::format("'{}' is '{}'; it must be one of: {}", key_path(key), v, fmt::join(choices, ", ")));
    }
    return v;
  }
  template <typename T>
  std::vector<T> list(const std::string& key) const {
    const YAML::Node v = node_[key];
    std::vector<T> out;
    if (!v) return out;
    if (!v.IsSequence()) fail(v, fmt::format("'{}' must be a list", key_path(key)));
    for (size_t i = 0; i < v.size(); ++i) {
      try {
        out.push_back(v[i].as<T>());
      } catch (const YAML::Exception&) {
        fail(v[i], fmt::format("'{}[{}]' has the wrong type (value '{}')", key_path(key), i, YAML::Dump(v[i])));
      }
    }
    return out;
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    const YAML::Node& where = at ? at : node_;
    throw InputError(fmt::format("{}: {}", yaml_where(where, origin_), path_.empty() || what.find(path_) != std::string::npos
                                                                            ? what
                                                                            : path_ + ": " + what));
  }

 private:
  YAML::Node node_;
  std::string path_;
  const std::string& origin_;
  std::set<std::string> seen_;
};

std::string resolve_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& item : node) {
        // A key that is itself a list or mapping (YAML's `? [a, b]: 1`) has no name; parse_job_config
        // turns this into bad input at the key's line.
        if (!item.first.IsScalar()) throw YAML::Exception(item.first.Mark(), "keys must be plain names, not lists or mappings");
        j[item.first.as<std::string>()] = yaml_to_json(item.second);
      }
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& item : node) j.push_back(yaml_to_json(item));
      return j;
    }
    case YAML::NodeType::Scalar:
      return node.as<std::string>();
    default:
      return nullptr;
  }
}

SamplingConfig read_sampling(const Section& parent, const std::string& key) {
  SamplingConfig s;
  if (!parent.has(key)) return s;
  const Section sec(parent.child(key), parent.key_path(key), parent.origin(),
                    {"temperature", "top_p", "top_k", "max_new_tokens"});
  s.temperature = sec.number<double>("temperature", s.temperature, 0.0, 100.0);
  s.top_p = sec.number<double>("top_p", s.top_p, 1e-9, 1.0);
  s.top_k = sec.number<int64_t>("top_k", s.top_k, 0, 1 << 24);
  s.max_new_tokens = sec.number<int64_t>("max_new_tokens", s.max_new_tokens, 1, 1 << 20);
  return s;
}

StageConfig read_stage(const YAML::Node& node, size_t index, const std::string& origin, const std::string& base_dir) {
  const std::string path = fmt::format("stages[{}]", index);
  const Section sec(node, path, origin,
                    {"kind", "steps", "epochs", "batch", "lr", "warmup", "updates_per_batch", "G", "K", "tau",
                     "bucket_width", "min_speedup", "sampling", "reward", "grpo", "data", "checkpoint",
                     "max_staleness", "planted"});
  StageConfig s;
  const std::string kind = sec.required<std::string>("kind");
  if (kind == "sft") {
    s.kind = StageKind::kSft;
  } else if (kind == "selftrain") {
    s.kind = StageKind::kSelftrain;
  } else if (kind == "crl") {
    s.kind = StageKind::kCrl;
  } else {
    sec.fail(sec.child("kind"), fmt::format("'{}.kind' is '{}'; it must be sft, selftrain or crl", path, kind));
  }
  // Keys that mean nothing for this kind are refused rather than ignored.
  const auto only_for = [&](const std::string& key, std::initializer_list<StageKind> kinds) {
    if (sec.has(key) && std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) {
      sec.fail(sec.child(key), fmt::format("'{}' does not apply to a stage of kind {}", sec.key_path(key), kind));
    }
  };
  only_for("epochs", {StageKind::kSft});
  only_for("data", {StageKind::kSft});
  only_for("steps", {StageKind::kSelftrain, StageKind::kCrl});
  for (const char* key : {"G", "sampling"}) only_for(key, {StageKind::kSelftrain, StageKind::kCrl});
  for (const char* key : {"K", "tau", "bucket_width", "reward", "grpo", "updates_per_batch", "max_staleness", "planted"}) {
    only_for(key, {StageKind::kCrl});
  }
  only_for("min_speedup", {StageKind::kSelftrain});

  s.steps = sec.number<int64_t>("steps", s.steps, 1, 10'000'000);
  s.epochs = sec.number<int64_t>("epochs", s.epochs, 1, 100'000);
  s.batch = sec.number<int64_t>("batch", s.batch, 1, 1'000'000);
  s.lr = sec.number<double>("lr", s.lr, 1e-12, 1.0);
  s.warmup = sec.number<int64_t>("warmup", s.warmup, 0, 10'000'000);
  s.updates_per_batch = sec.number<int64_t>("updates_per_batch", s.updates_per_batch, 1, 1000);
  s.group = sec.number<int64_t>("G", s.kind == StageKind::kSelftrain ? 8 : s.group, s.kind == StageKind::kCrl ? 2 : 1, 4096);
  s.exemplars = sec.number<int64_t>("K", s.exemplars, 0, 64);
  s.tau = sec.number<double>("tau", s.tau, 1e-6, 1e6);
  s.bucket_width = sec.number<double>("bucket_width", s.bucket_width, 1e-6, 1e6);
  s.min_speedup = sec.number<double>("min_speedup", s.min_speedup, 0.0, 1e9);
  s.sampling = read_sampling(sec, "sampling");
  if (sec.has("reward")) {
    const Section r(sec.child("reward"), sec.key_path("reward"), origin, {"window", "clip"});
    s.reward.window = r.number<int64_t>("window", s.reward.window, 2, 10'000'000);
    s.reward.clip = r.number<double>("clip", s.reward.clip, 1e-6, 1e6);
  }
  if (sec.has("grpo")) {
    const Section g(sec.child("grpo"), sec.key_path("grpo"), origin, {"clip", "clip_high", "kl"});
    s.grpo.clip = g.number<double>("clip", s.grpo.clip, 0.0, 1.0);
    s.grpo.clip_high = g.number<double>("clip_high", s.grpo.clip_high, 0.0, 100.0);
    s.grpo.kl = g.number<double>("kl", s.grpo.kl, 0.0, 1e6);
  }
  if (sec.has("checkpoint")) {
    const Section c(sec.child("checkpoint"), sec.key_path("checkpoint"), origin, {"every", "keep", "every_minutes"});
    s.checkpoint.every = c.number<int64_t>("every", s.checkpoint.every, 0, 10'000'000);
    s.checkpoint.keep = c.number<int64_t>("keep", s.checkpoint.keep, 1, 1000);
    s.checkpoint.every_minutes = c.number<double>("every_minutes", s.checkpoint.every_minutes, 0.0, 1e6);
  }
  s.max_staleness = sec.number<int64_t>("max_staleness", s.max_staleness, 0, 1);
  if (s.kind == StageKind::kSft) {
    s.data = resolve_path(base_dir, sec.required<std::string>("data"));
    if (s.data.empty()) sec.fail(sec.child("data"), fmt::format("'{}' is empty", sec.key_path("data")));
  }
  if (sec.has("planted")) {
    const YAML::Node list = sec.child("planted");
    if (!list.IsSequence()) sec.fail(list, fmt::format("'{}' must be a list", sec.key_path("planted")));
    for (size_t i = 0; i < list.size(); ++i) {
      const Section p(list[i], fmt::format("{}.planted[{}]", path, i), origin, {"task", "file"});
      s.planted.push_back({p.required<std::string>("task"), resolve_path(base_dir, p.required<std::string>("file"))});
    }
  }
  return s;
}

TaskSelectionConfig read_task_selection(const Section& parent, const std::string& key) {
  const Section tasks(parent.child(key), parent.key_path(key), parent.origin(), {"ids", "levels", "categories"});
  TaskSelectionConfig selection;
  selection.ids = tasks.list<std::string>("ids");
  selection.levels = tasks.list<int>("levels");
  selection.categories = tasks.list<std::string>("categories");
  return selection;
}

ValidationConfig read_validation(const Section& parent, const std::vector<StageConfig>& stages) {
  const Section sec(parent.child("validation"), "validation", parent.origin(), {"tasks", "every", "G", "sampling"});
  ValidationConfig v;
  v.enabled = true;
  if (!sec.has("tasks")) {
    sec.fail(parent.child("validation"), "missing key 'validation.tasks' (the held-out tasks: ids, levels or categories, "
                                         "none of them one of the job's `tasks`)");
  }
  v.tasks = read_task_selection(sec, "tasks");
  if (v.tasks.ids.empty() && v.tasks.levels.empty() && v.tasks.categories.empty()) {
    sec.fail(sec.child("tasks"), "'validation.tasks' selects nothing: give ids, levels or categories of held-out tasks");
  }
  v.where = yaml_where(sec.child("tasks"), parent.origin());
  v.every = sec.number<int64_t>("every", v.every, 1, 10'000'000);
  v.group = sec.number<int64_t>("G", v.group, 1, 4096);
  v.sampling = read_sampling(sec, "sampling");
  if (std::none_of(stages.begin(), stages.end(), [](const StageConfig& s) { return s.kind != StageKind::kSft; })) {
    sec.fail(parent.child("validation"), "'validation' runs during the generating stages (selftrain, crl), and the job has "
                                         "none: add one, or remove 'validation'");
  }
  return v;
}

}  // namespace

std::string stage_kind_name(StageKind kind) {
  switch (kind) {
    case StageKind::kSft: return "sft";
    case StageKind::kSelftrain: return "selftrain";
    case StageKind::kCrl: return "crl";
  }
  return "?";
}

bool has_generating_stage(const JobConfig& job) {
  return std::any_of(job.stages.begin(), job.stages.end(), [](const StageConfig& s) { return s.kind != StageKind::kSft; });
}

static JobConfig parse_job_config_checked(const std::string& text, const std::string& origin, const std::string& base_dir);

// What yaml-cpp throws past the checks below (a conversion of a node the checks did not foresee)
// is still bad input in the job file, never a crash (fuzz_job_config found one).
JobConfig parse_job_config(const std::string& text, const std::string& origin, const std::string& base_dir) {
  try {
    return parse_job_config_checked(text, origin, base_dir);
  } catch (const YAML::Exception& e) {
    throw InputError(fmt::format("{}:{}: {}", origin, e.mark.is_null() ? 0 : e.mark.line + 1, e.msg));
  }
}

static JobConfig parse_job_config_checked(const std::string& text, const std::string& origin, const std::string& base_dir) {
  const YAML::Node root = parse_yaml(text, origin);
  if (!root || root.IsNull()) throw InputError(origin + ": the job file is empty");
  JobConfig job;
  job.as_json = yaml_to_json(root);  // first: it refuses keys that are lists or mappings, anywhere
  const Section sec(root, "", origin,
                    {"name", "seed", "model", "prompt_format", "backend", "dtype", "roles", "micro_batch_size", "share_gpu",
                     "suite", "instructions", "program_format", "kernelbench", "tasks", "stages", "eval", "generation", "lora",
                     "validation"});
  job.path = origin;
  job.name = sec.required<std::string>("name");
  if (job.name.empty()) sec.fail(sec.child("name"), "'name' is empty");
  job.seed = sec.get<uint64_t>("seed", job.seed);
  job.model = resolve_path(base_dir, sec.required<std::string>("model"));
  job.prompt_format = sec.choice("prompt_format", "chat", {"chat", "raw"}) == "chat" ? PromptFormat::kChat : PromptFormat::kRaw;
  job.backend = sec.choice("backend", job.backend, {"cpu", "cuda"});
  job.dtype = sec.choice("dtype", job.dtype, {"fp32", "bf16"});
  job.micro_batch_size = sec.number<int64_t>("micro_batch_size", job.micro_batch_size, 1, 4096);
  job.share_gpu = sec.get<bool>("share_gpu", job.share_gpu);
  job.suite = resolve_path(base_dir, sec.get<std::string>("suite", ""));
  job.instructions = resolve_path(base_dir, sec.get<std::string>("instructions", ""));
  job.program_format = sec.choice("program_format", "crl", {"crl", "kernelbench"}) == "kernelbench" ? ProgramKind::kernelbench
                                                                                                    : ProgramKind::crl;
  job.kernelbench = resolve_path(base_dir, sec.get<std::string>("kernelbench", ""));
  if (job.program_format == ProgramKind::kernelbench && job.kernelbench.empty()) {
    sec.fail(sec.child("program_format"), "program_format kernelbench needs 'kernelbench': a KernelBench checkout (its modules are "
                                          "the references the prompts show)");
  }
  if (sec.has("roles")) {
    const Section roles(sec.child("roles"), "roles", origin, {"trainers"});
    job.trainers = roles.number<int>("trainers", job.trainers, 1, 1 << 20);
  }
  if (sec.has("tasks")) job.tasks = read_task_selection(sec, "tasks");
  if (sec.has("eval")) {
    const Section ev(sec.child("eval"), "eval", origin, {"scale", "trials", "time_budget", "call_timeout", "max_relative_ci",
                                                             "timing", "reuse_verdicts", "max_failed_steps", "precision"});
    job.eval.scale = ev.choice("scale", job.eval.scale, {"small", "full"});
    job.eval.trials = ev.number<int>("trials", job.eval.trials, 1, 1000);
    job.eval.time_budget = ev.number<double>("time_budget", job.eval.time_budget, 0.0, 3600.0);
    job.eval.call_timeout = ev.number<double>("call_timeout", job.eval.call_timeout, 0.1, 3600.0);
    job.eval.max_relative_ci = ev.number<double>("max_relative_ci", job.eval.max_relative_ci, 0.001, 100.0);
    job.eval.timing = ev.get<bool>("timing", job.eval.timing);
    job.eval.precision = ev.choice("precision", job.eval.precision, {"fp32", "tf32"});
    job.eval.reuse_verdicts = ev.get<bool>("reuse_verdicts", job.eval.reuse_verdicts);
    job.eval.max_failed_steps = ev.number<int>("max_failed_steps", job.eval.max_failed_steps, 0, 1000000);
  }
  if (sec.has("generation")) {
    const Section gen(sec.child("generation"), "generation", origin, {"kv_cache_mib", "max_running"});
    job.generation.kv_cache_mib = gen.number<int64_t>("kv_cache_mib", job.generation.kv_cache_mib, 1, int64_t{1} << 24);
    job.generation.max_running = gen.number<int64_t>("max_running", job.generation.max_running, 1, 4096);
  }
  if (sec.has("lora")) {
    const Section lora(sec.child("lora"), "lora", origin, {"rank", "alpha", "dropout", "targets"});
    job.lora.enabled = true;
    job.lora.rank = lora.number<int64_t>("rank", job.lora.rank, 1, 4096);
    job.lora.alpha = lora.number<double>("alpha", job.lora.alpha, 1e-6, 1e6);
    job.lora.dropout = lora.number<double>("dropout", job.lora.dropout, 0.0, 0.99);
    if (lora.has("targets")) {
      job.lora.targets = lora.list<std::string>("targets");
      const std::set<std::string> known{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      if (job.lora.targets.empty()) lora.fail(lora.child("targets"), "'lora.targets' is empty");
      for (const std::string& t : job.lora.targets) {
        if (!known.contains(t)) {
          lora.fail(lora.child("targets"), fmt::format("'lora.targets' holds '{}'; known: {}", t, fmt::join(known, ", ")));
        }
      }
    }
  }
  const YAML::Node stages = sec.child("stages");
  if (!stages) sec.fail(root, "missing key 'stages' (a list of stages: sft, selftrain, crl)");
  if (!stages.IsSequence() || stages.size() == 0) sec.fail(stages, "'stages' must be a non-empty list");
  for (size_t i = 0; i < stages.size(); ++i) job.stages.push_back(read_stage(stages[i], i, origin, base_dir));
  if (sec.has("validation")) job.validation = read_validation(sec, job.stages);
  return job;
}

namespace {

void collect_changes(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, std::vector<std::string>& out) {
  const auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      if (!b.contains(key)) {
        out.push_back(child(key));
      } else {
        collect_changes(value, b.at(key), child(key), out);
      }
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key)) out.push_back(child(key));
    }
  } else if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      if (i >= a.size() || i >= b.size()) {
        out.push_back(at);
      } else {
        collect_changes(a[i], b[i], at, out);
      }
    }
  } else if (a != b) {
    out.push_back(path.empty() ? "(the whole file)" : path);
  }
}

bool covers(const std::string& allowed, const std::string& key) {
  if (key == allowed) return true;
  return key.size() > allowed.size() && key.compare(0, allowed.size(), allowed) == 0 &&
         (key[allowed.size()] == '.' || key[allowed.size()] == '[');
}

}  // namespace

std::vector<std::string> changed_job_keys(const nlohmann::json& before, const nlohmann::json& after) {
  std::vector<std::string> out;
  collect_changes(before, after, "", out);
  std::sort(out.begin(), out.end());
  return out;
}

void require_unchanged_job(const nlohmann::json& before, const nlohmann::json& after, const std::vector<std::string>& allowed,
                           const std::string& what) {
  std::vector<std::string> refused;
  for (const std::string& key : changed_job_keys(before, after)) {
    if (std::none_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return covers(a, key); })) {
      refused.push_back(key);
    }
  }
  if (refused.empty()) return;
  throw InputError(fmt::format(
      "{}: the job file changed since the checkpoint: key{} {} differ{}. Restore the job file, or accept the change "
      "with --allow-config-change {}",
      what, refused.size() == 1 ? "" : "s", fmt::join(refused, ", "), refused.size() == 1 ? "s" : "", fmt::join(refused, ",")));
}

JobConfig load_job_config(const std::string& path) {
  const std::string base = fs::path(path).parent_path().string();
  return parse_job_config(read_input_file(path, "job file"), path, base.empty() ? "." : base);
}

}  // namespace crl::rl
