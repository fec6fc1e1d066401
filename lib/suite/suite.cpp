// Loading and validating the task suite; task metadata as JSON.
#include "suite/suite.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/read_file.h"

namespace crl {
namespace fs = std::filesystem;

std::string resolve_suite_dir(const std::string& flag) {
  std::string dir, source;
  if (!flag.empty()) {
    dir = flag;
    source = "--suite";
  } else if (const char* env = std::getenv("CRL_SUITE_DIR"); env != nullptr && *env != '\0') {
    dir = env;
    source = "$CRL_SUITE_DIR";
  } else {
    dir = CRL_DEFAULT_SUITE_DIR;
    source = "the build's default (the source tree's jobs/suite)";
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("suite folder '{}' (from {}) does not exist or is not a folder; pass "
                                 "--suite or set CRL_SUITE_DIR to the folder holding level1/, level2/, ...",
                                 dir, source));
  }
  return dir;
}

const std::vector<std::string>& level1_categories() {
  static const std::vector<std::string> categories = {"matmul",    "activation",  "normalization",
                                                      "pooling",   "reduction",   "convolution",
                                                      "scan",      "loss",        "attention"};
  return categories;
}

bool is_known_category(int level, const std::string& category) {
  if (level == 1) {
    const auto& known = level1_categories();
    return std::find(known.begin(), known.end(), category) != known.end();
  }
  static const std::regex identifier("[a-z][a-z0-9_]*");
  return std::regex_match(category, identifier);
}

namespace {

// Loads one task file; throws InputError (from the parsers, or naming the mismatch) when it is invalid.
Task load_task(const fs::path& path, int level) {
  Task task;
  task.path = path.string();
  task.level = level;
  task.text = read_file(path, "task file");
  task.program = parse_program_text(task.text, task.path);
  task.spec = parse_task_spec(task.program.spec, task.path);
  const std::string expected_id = fmt::format("level{}/{}", level, path.stem().string());
  if (task.spec.id != expected_id) {
    throw InputError(fmt::format("{}:{}: task id '{}' does not match the file's place in the suite (expected '{}')",
                                 task.path, task.program.spec.first_line, task.spec.id, expected_id));
  }
  if (!is_known_category(level, task.spec.category)) {
    std::string known;
    for (const auto& c : level1_categories()) known += (known.empty() ? "" : ", ") + c;
    throw InputError(fmt::format("{}:{}: unknown category '{}' for a level-{} task (known: {})", task.path,
                                 task.program.spec.first_line, task.spec.category, level,
                                 level == 1 ? known : "a lower-case identifier"));
  }
  task.id = task.spec.id;
  return task;
}

// Level folders are level1 .. level<kMaxLevel>: N is a task id's part, printed and compared, never
// a count, but a number that overflows (level99999999999) is a folder no suite means.
constexpr int kMaxLevel = 1000;

// N of a folder named level<N>; nullopt for a name of another form (not a level folder, skipped);
// InputError naming the folder for level<digits> out of 1 .. kMaxLevel.
std::optional<int> level_of_folder(const fs::path& folder) {
  const std::string name = folder.filename().string();
  constexpr std::string_view kPrefix = "level";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  int level = 0;
  const auto [end, error] = std::from_chars(first, last, level);
  if (error != std::errc() || end != last || level < 1 || level > kMaxLevel) {
    throw InputError(fmt::format("suite folder '{}': level folder '{}' is out of range (level1 .. level{})",
                                 folder.parent_path().string(), name, kMaxLevel));
  }
  return level;
}

// The entries of `dir`; InputError naming it when it cannot be listed.
std::vector<fs::directory_entry> entries_of(const fs::path& dir) {
  std::vector<fs::directory_entry> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(*it);
  if (ec) throw InputError(fmt::format("suite folder '{}': cannot list it: {}", dir.string(), ec.message()));
  return out;
}

// The type of what `entry` names, links followed; InputError naming it when that cannot be told (a
// symbolic link loop, no permission). A dangling link is not_found.
fs::file_type type_of(const fs::directory_entry& entry) {
  std::error_code ec;
  const fs::file_status status = entry.status(ec);
  if (ec && status.type() != fs::file_type::not_found) {
    throw InputError(fmt::format("suite entry '{}': {}", entry.path().string(), ec.message()));
  }
  return status.type();
}

// Every <dir>/level<N>/*.crl with its N, sorted.
std::vector<std::pair<fs::path, int>> task_files(const std::string& dir) {
  std::vector<std::pair<fs::path, int>> files;
  for (const fs::directory_entry& entry : entries_of(dir)) {
    const std::optional<int> level = level_of_folder(entry.path());
    if (!level || type_of(entry) != fs::file_type::directory) continue;
    for (const fs::directory_entry& file : entries_of(entry.path())) {
      if (file.path().extension() == ".crl" && type_of(file) == fs::file_type::regular) files.emplace_back(file.path(), *level);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Suite Suite::load(const std::string& dir) {
  Suite suite;
  suite.dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(fmt::format("suite folder '{}' does not exist", dir));
  const std::vector<std::pair<fs::path, int>> files = task_files(dir);
  std::vector<std::string> problems;
  std::map<std::string, std::string> seen;  // id -> path
  for (const auto& [path, level] : files) {
    try {
      Task task = load_task(path, level);
      if (auto [it, inserted] = seen.emplace(task.id, task.path); !inserted) {
        problems.push_back(fmt::format("{}: task id '{}' is also used by {}", task.path, task.id, it->second));
        continue;
      }
      suite.tasks_.push_back(std::move(task));
    } catch (const InputError& e) {
      problems.push_back(e.what());
    }
  }
  if (!problems.empty()) {
    std::string message = fmt::format("suite '{}': {} of {} task files are invalid:", dir, problems.size(), files.size());
    for (const auto& p : problems) message += "\n  " + p;
    throw InputError(message);
  }
  std::sort(suite.tasks_.begin(), suite.tasks_.end(), [](const Task& a, const Task& b) { return a.id < b.id; });
  return suite;
}

const Task& Suite::find(const std::string& id) const {
  for (const auto& task : tasks_) {
    if (task.id == id) return task;
  }
  // Suggest tasks sharing the number or the name part, so a near miss is easy to correct.
  std::string close;
  const std::string tail = id.substr(id.find('/') == std::string::npos ? 0 : id.find('/') + 1);
  for (const auto& task : tasks_) {
    const std::string task_tail = task.id.substr(task.id.find('/') + 1);
    if (!tail.empty() && (task_tail.find(tail) != std::string::npos || tail.find(task_tail.substr(0, 3)) == 0)) {
      close += (close.empty() ? "" : ", ") + task.id;
    }
  }
  throw InputError(fmt::format("no task '{}' in suite '{}'{}", id, dir_,
                               close.empty() ? "" : fmt::format(" (did you mean: {}?)", close)));
}

std::vector<const Task*> Suite::select(const TaskFilter& filter) const {
  std::vector<const Task*> out;
  if (!filter.ids.empty()) {
    for (const auto& id : filter.ids) {
      const Task& task = find(id);  // throws, naming the id, for an unknown one
      if ((!filter.level || task.level == *filter.level) &&
          (filter.category.empty() || task.spec.category == filter.category)) {
        out.push_back(&task);
      }
    }
    return out;
  }
  for (const auto& task : tasks_) {
    if (filter.level && task.level != *filter.level) continue;
    if (!filter.category.empty() && task.spec.category != filter.category) continue;
    out.push_back(&task);
  }
  return out;
}

namespace {

nlohmann::json tensor_json(const TaskSpec& spec, const TensorSpec& t) {
  nlohmann::json j;
  j["name"] = t.name;
  j["dtype"] = dtype_name(t.dtype);
  j["init"] = t.init.text;
  nlohmann::json post = nlohmann::json::array();
  for (const auto& op : t.post) post.push_back(op.text);
  j["post"] = post;
  nlohmann::json edges = nlohmann::json::array();
  for (const auto& edge : t.edges) edges.push_back(edge.text);
  j["edges"] = edges;
  nlohmann::json shape_expr = nlohmann::json::array();
  for (const auto& e : t.shape) shape_expr.push_back(e.text());
  j["shape"] = shape_expr;
  for (const auto& scale : spec.scale_names()) j["shape_at"][scale] = spec.shape_at(t, scale);
  return j;
}

// A KernelBench tensor (kernelbench_params): its name, shape as written and per scale, and the param that
// holds it with the transform (null where none), or why no param does.
nlohmann::json kernelbench_tensor_json(const TaskSpec& spec, const KernelBenchTensor& t) {
  nlohmann::json j;
  j["name"] = t.name;
  j["shape"] = nlohmann::json::array();
  for (const auto& e : t.shape) j["shape"].push_back(e.text());
  for (const auto& scale : spec.scale_names()) j["shape_at"][scale] = spec.kernelbench_shape_at(t, scale);
  j["param"] = t.param ? nlohmann::json(spec.params[*t.param].name) : nlohmann::json();
  j["transform"] = t.transform_text.empty() ? nlohmann::json() : nlohmann::json(t.transform_text);
  j["unmatched"] = t.param ? nlohmann::json() : nlohmann::json(t.unmatched);
  return j;
}

}  // namespace

nlohmann::json task_metadata_json(const Task& task) {
  const TaskSpec& spec = task.spec;
  nlohmann::json j;
  j["id"] = task.id;
  j["name"] = spec.name;
  j["level"] = task.level;
  j["category"] = spec.category;
  j["description"] = spec.description;
  j["notes"] = spec.notes;
  j["path"] = task.path;
  j["inputs"] = nlohmann::json::array();
  for (const auto& t : spec.inputs) j["inputs"].push_back(tensor_json(spec, t));
  j["params"] = nlohmann::json::array();
  for (const auto& t : spec.params) j["params"].push_back(tensor_json(spec, t));
  j["flops"] = spec.flops.text();
  j["bytes"] = spec.bytes.text();
  // The module's constructor arguments as written, and per scale as Python spells them (null: not recorded).
  j["init_args"] = nullptr;
  if (spec.init_args) {
    j["init_args"] = nlohmann::json::array();
    for (const InitArg& arg : *spec.init_args) j["init_args"].push_back(arg.text);
  }
  // The module's tensors in its order and the param each one is (null: not recorded).
  j["kernelbench_params"] = nullptr;
  if (spec.kernelbench_params) {
    nlohmann::json& kb = j["kernelbench_params"];
    kb["parameters"] = nlohmann::json::array();
    kb["buffers"] = nlohmann::json::array();
    for (const auto& t : spec.kernelbench_params->parameters) kb["parameters"].push_back(kernelbench_tensor_json(spec, t));
    for (const auto& t : spec.kernelbench_params->buffers) kb["buffers"].push_back(kernelbench_tensor_json(spec, t));
    kb["crl_only"] = spec.kernelbench_params->crl_only;
  }
  for (const auto& scale : spec.scale_names()) {
    nlohmann::json s;
    s["variables"] = spec.scale_variables(scale);
    s["flops"] = spec.flops_at(scale);
    s["bytes"] = spec.bytes_at(scale);
    s["init_args"] = spec.init_args ? nlohmann::json(python_literal(spec.init_args_at(scale))) : nlohmann::json();
    j["scales"][scale] = s;
  }
  const Tolerance tol = spec.tolerance_for(at::ScalarType::Float);
  j["tolerance"] = {{"atol", tol.atol}, {"rtol", tol.rtol}, {"from_spec", spec.tolerance.has_value()}};
  return j;
}

}  // namespace crl
