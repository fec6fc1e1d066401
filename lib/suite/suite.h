// The task suite: finding its folder, loading and validating every reference program, selecting tasks.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "program/program_text.h"
#include "program/task_spec.h"

namespace crl {

// One task: a reference program at <suite>/level<N>/<NNN>_<name>.crl whose id is level<N>/<NNN>_<name>.
struct Task {
  std::string id;    // "level1/019_relu"
  int level = 0;     // N of level<N>
  std::string path;  // the .crl file
  std::string text;  // the file's text, exactly as the policy is shown it
  ProgramText program;
  TaskSpec spec;
};

// Where the suite lives: `flag` when not empty, else $CRL_SUITE_DIR, else the source tree's jobs/suite
// (baked in at build time). Throws InputError when the chosen folder does not exist, naming where the
// choice came from.
std::string resolve_suite_dir(const std::string& flag = "");

// The categories a level's tasks may use. Level 1's are fixed (KernelBench's families); levels 2 and 3
// name their leading operation family or model kind, so any lower-case identifier is accepted there.
const std::vector<std::string>& level1_categories();
bool is_known_category(int level, const std::string& category);

// Which tasks a command works on; empty fields match everything.
struct TaskFilter {
  std::optional<int> level;
  std::string category;
  std::vector<std::string> ids;  // exact ids (any of them); empty: every id
};

class Suite {
 public:
  // Loads every <dir>/level<N>/*.crl and validates it: the program and its spec parse, the id equals the
  // file's path (level folder and file name), the category is known for the level, ids are unique.
  // All problems found are reported together in one InputError (one line each, file:line first).
  static Suite load(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::vector<Task>& tasks() const { return tasks_; }  // sorted by id
  // The task with this id; throws InputError (naming the suite folder) when there is none.
  const Task& find(const std::string& id) const;
  // The tasks the filter matches, in id order; an `id` that matches nothing throws as find() does.
  std::vector<const Task*> select(const TaskFilter& filter) const;

 private:
  std::string dir_;
  std::vector<Task> tasks_;
};

// A task's metadata for tools and reports: id, name, level, category, description, notes, path, its
// inputs and params (name, dtype, init, post, shape at every scale), and per scale the variables,
// flops and bytes; tolerance (the spec's, or the default for float32 outputs, marked as such).
nlohmann::json task_metadata_json(const Task& task);

}  // namespace crl
