// `crl eval-model --model DIR [TASK... | --level N | --job JOB.yaml] --h5 FILE [--samples G ...]`: a
// model's own evaluation, KernelBench's generate + eval_from_generations in one command:
//   1. the prompts, exactly as `crl prompt` prints them (task_prompts.h), each through the model's chat
//      template or raw (--prompt-format; a job file's prompt_format);
//   2. G samples per task from the generation engine (sampling_options.h), the tasks in chunks, each
//      chunk's completions flushed into the results file (/samples, /text/sample_completions);
//   3. the model freed, every sample judged by the evaluator as `crl eval` judges a JSONL (judging.h):
//      a completion without a program is its own format_error verdict, never the end of the command;
//      each verdict flushed into /verdicts as it is made, its candidate "sample S";
//   4. a summary (per task: samples, correct, best speedup; pass@1, fast_1 over the chosen tasks), and
//      `crl report FILE` for pass@k, fast_p over the level's tasks and the rest.
// --resume continues a file cut short: samples it holds are not generated again, verdicts it holds
// (internal_error aside) not judged again; it must have been sampled and judged as this run asks.
// --append adds G more samples per task (numbered on from the file's, so they are new draws).
// Exit 0 when every sample is judged (its verdicts are the model's result, whatever they are), 1 when
// some verdicts are internal_error (crl's failure: --resume judges them again), 4 when all are, 3 for
// bad input, 2 for bad arguments.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "apps/crl/candidates.h"
#include "apps/crl/commands.h"
#include "apps/crl/input_paths.h"
#include "apps/crl/judging.h"
#include "apps/crl/sampling_options.h"
#include "apps/crl/task_prompts.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/json_bounded.h"
#include "core/read_file.h"
#include "core/text_table.h"
#include "policy/engine.h"
#include "policy/model.h"
#include "policy/tokenizer.h"
#include "results/results_reader.h"
#include "rl/chat_template.h"

#if CRL_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace crl::cli {
namespace {

namespace fs = std::filesystem;

struct EvalModelOptions {
  std::string model_dir;
  TaskSelectionOptions selection;
  int64_t samples = 1;
  SamplingArgs sampling;
  std::string prompt_format;  // chat or raw; empty: the job's, else chat where the model has a template
  int64_t chunk_tasks = 0;    // tasks sampled together before their completions are flushed; 0: auto
  JudgeOptions judge;
  ResultsFileOptions results;
  bool json = false;
};

// ---- the results file's own parts beside /verdicts ------------------------------------------

constexpr const char* kSamplesTable = "samples";
constexpr const char* kCompletionStore = "sample_completions";

// /samples: one row per sampled completion (its text in /text/sample_completions under sample_id).
const results::TableSchema& samples_schema() {
  static const results::TableSchema schema = {{"sample_id", results::ColumnType::int64},
                                              {"task", results::ColumnType::string},
                                              {"sample", results::ColumnType::int64},
                                              {"prompt_tokens", results::ColumnType::int64},
                                              {"completion_tokens", results::ColumnType::int64},
                                              {"finish_reason", results::ColumnType::string}};
  return schema;
}

std::string sample_name(int64_t sample) { return fmt::format("sample {}", sample); }

// One sample of one task: what is generated, stored and judged.
struct Sample {
  size_t task = 0;  // index into the chosen tasks
  int64_t index = 0;
  std::string completion;
  bool have_completion = false;  // sampled now, or read from the file
  bool judged = false;           // the file holds its verdict (not internal_error)
};

// What an existing file holds (for --resume and --append): its verdicts, its samples' completions
// by (task, sample), and how many samples each task has.
struct FileContents {
  JudgedVerdicts verdicts;
  std::map<std::pair<std::string, int64_t>, std::string> completions;
  std::map<std::string, int64_t> samples_per_task;
};

// The settings that decide the samples: a file sampled otherwise is refused, since pass@k over a
// mixture of models or temperatures is no result.
nlohmann::json generation_settings(const EvalModelOptions& o, const std::string& model, rl::PromptFormat format) {
  return {{"model", model},
          {"prompt_format", format == rl::PromptFormat::kChat ? "chat" : "raw"},
          {"temperature", o.sampling.temperature},
          {"top_p", o.sampling.top_p},
          {"top_k", o.sampling.top_k},
          {"max_new_tokens", o.sampling.max_new_tokens},
          {"seed", o.sampling.seed},
          {"dtype", o.sampling.dtype},
          {"stop", o.sampling.stop},
          {"ignore_eos", o.sampling.ignore_eos}};
}

FileContents read_file_contents(const std::string& path, const nlohmann::json& eval_options, const nlohmann::json& settings,
                                const char* flag) {
  FileContents out;
  out.verdicts = read_judged_verdicts(path, eval_options);
  const results::ResultsReader reader(path);
  reader.validate({.tables = {{.table = kSamplesTable, .columns = samples_schema()}},
                   .meta = {{.key = "generation", .shape = results::MetaShape::json_object}}});
  const auto keys = reader.meta_keys();
  if (std::find(keys.begin(), keys.end(), "generation") == keys.end()) {
    throw InputError(fmt::format("{} {}: not a file of crl eval-model (no /meta generation); give another --h5 file", flag, path));
  }
  const nlohmann::json before = reader.meta_json("generation");
  for (const auto& [key, value] : settings.items()) {
    if (before.value(key, nlohmann::json()) != value) {
      throw InputError(fmt::format("{} {}: its samples were drawn with {} {}, this run asks for {}; give another --h5 file", flag,
                                   path, key, before.value(key, nlohmann::json()).dump(), value.dump()));
    }
  }
  const auto tables = reader.tables();
  if (std::find(tables.begin(), tables.end(), kSamplesTable) == tables.end()) return out;
  const auto ids = reader.column_as<int64_t>(kSamplesTable, "sample_id");
  const auto tasks = reader.column_as<std::string>(kSamplesTable, "task");
  const auto samples = reader.column_as<int64_t>(kSamplesTable, "sample");
  const auto stores = reader.text_stores();
  const std::map<int64_t, std::string> texts = std::find(stores.begin(), stores.end(), kCompletionStore) != stores.end()
                                                   ? reader.texts(kCompletionStore)
                                                   : std::map<int64_t, std::string>();
  for (size_t i = 0; i < ids.size() && i < tasks.size() && i < samples.size(); ++i) {
    out.samples_per_task[tasks[i]] = std::max(out.samples_per_task[tasks[i]], samples[i] + 1);
    if (const auto it = texts.find(ids[i]); it != texts.end()) out.completions[{tasks[i], samples[i]}] = it->second;
  }
  return out;
}

// ---- sampling --------------------------------------------------------------------------------

// Whether a model folder holds a chat template (tokenizer_config.json's chat_template, or
// chat_template.jinja beside it): without --prompt-format or a job, it decides chat or raw.
bool has_chat_template(const fs::path& dir) {
  if (fs::exists(dir / "chat_template.jinja")) return true;
  const fs::path config = dir / "tokenizer_config.json";
  if (!fs::exists(config)) return false;
  const nlohmann::json j = parse_json_bounded(read_file(config, "tokenizer config", uint64_t{64} << 20), config.string());
  return j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null();
}

rl::PromptFormat prompt_format_of(const EvalModelOptions& o, const rl::JobConfig& job, const fs::path& model) {
  if (!o.prompt_format.empty()) return o.prompt_format == "chat" ? rl::PromptFormat::kChat : rl::PromptFormat::kRaw;
  if (!o.selection.job.empty()) return job.prompt_format;
  return has_chat_template(model) ? rl::PromptFormat::kChat : rl::PromptFormat::kRaw;
}

// A sample's draws depend on the seed and its key alone (policy/engine.h): keyed by its task's id
// and its index, a sample drawn again (--resume) is the same, and one of another task is another.
int64_t sample_key(const std::string& task, int64_t sample) {
  const std::string digest = sha256_hex(task);
  const int64_t task_part = static_cast<int64_t>(std::stoull(digest.substr(0, 8), nullptr, 16) & 0x7FFFFFFF);
  return (task_part << 20) | sample;
}

// The policy, its tokenizer and template, and the engine's options, for the sampling phase only
// (freed before the evaluator's workers need the GPU).
struct Sampler {
  policy::CausalLm model;
  policy::Tokenizer tokenizer;
  std::optional<rl::ChatTemplate> chat;
};

Sampler load_sampler(const EvalModelOptions& o, const fs::path& dir, rl::PromptFormat format, const std::string& device) {
  if (!fs::exists(dir / "tokenizer.json")) {
    throw InputError(fmt::format("--model {}: no tokenizer.json: the prompts are text and must be encoded", dir.string()));
  }
  policy::Tokenizer tokenizer = policy::Tokenizer::from_file(dir / "tokenizer.json");
  std::optional<rl::ChatTemplate> chat;
  if (format == rl::PromptFormat::kChat) chat.emplace(rl::ChatTemplate::from_model_dir(dir));
  policy::CausalLm model = policy::load_causal_lm(dir, policy::parse_dtype(o.sampling.dtype), policy::parse_device(device));
  return {std::move(model), std::move(tokenizer), std::move(chat)};
}

// Samples the chosen tasks' missing samples, chunk by chunk; each chunk's completions are appended to
// /samples and flushed before the next is drawn.
void sample_missing(const EvalModelOptions& o, const TaskPrompts& chosen, std::vector<Sample>& samples, Sampler& sampler,
                    const fs::path& model_dir, results::ResultsWriter& writer) {
  std::vector<size_t> todo;  // indices into samples
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!samples[i].judged && !samples[i].have_completion) todo.push_back(i);
  }
  if (todo.empty()) return;
  std::vector<std::vector<int64_t>> prompt_ids(chosen.tasks.size());
  const policy::GenerationOptions generation = generation_options_of(o.sampling, sampler.model, model_dir, o.sampling.max_new_tokens);
  const policy::TokenDecoder decode = [&](const std::vector<int64_t>& ids) { return sampler.tokenizer.decode_sampled(ids, true); };
  // A chunk fills the engine's running set once: its tasks' samples decode together.
  const size_t per_chunk = o.chunk_tasks > 0 ? static_cast<size_t>(o.chunk_tasks)
                                             : std::max<size_t>(1, static_cast<size_t>(policy::EngineOptions{}.max_running / o.samples));
  int64_t next_id = writer.rows(kSamplesTable);
  std::set<size_t> tasks_to_sample;
  for (size_t i : todo) tasks_to_sample.insert(samples[i].task);
  const size_t total_tasks = tasks_to_sample.size();
  const auto start = std::chrono::steady_clock::now();
  std::set<size_t> tasks_done;
  size_t first = 0;
  while (first < todo.size()) {
    // The samples of the next per_chunk tasks (a task's samples stay in one chunk).
    std::set<size_t> chunk_tasks;
    size_t end = first;
    while (end < todo.size() && (chunk_tasks.count(samples[todo[end]].task) > 0 || chunk_tasks.size() < per_chunk)) {
      chunk_tasks.insert(samples[todo[end]].task);
      ++end;
    }
    std::vector<policy::GenerationRequest> requests;
    for (size_t k = first; k < end; ++k) {
      const Sample& s = samples[todo[k]];
      std::vector<int64_t>& ids = prompt_ids[s.task];
      if (ids.empty()) ids = rl::policy_prompt_ids(sampler.tokenizer, sampler.chat ? &*sampler.chat : nullptr, chosen.prompts[s.task]);
      requests.push_back({ids, 1, sample_key(chosen.tasks[s.task]->id, s.index), o.sampling.max_new_tokens});
    }
    policy::GenerationEngine engine(sampler.model, engine_options_for(o.sampling, requests, sampler.model));
    const policy::GenerationResult result = engine.run(requests, generation, decode);
    results::RowBatch rows(samples_schema());
    std::vector<int64_t> text_ids;
    std::vector<std::string> texts;
    int64_t tokens = 0;
    for (size_t k = first; k < end; ++k) {
      Sample& s = samples[todo[k]];
      const policy::GeneratedSequence& seq = result.sequences[k - first];
      s.completion = seq.text;
      s.have_completion = true;
      tokens += static_cast<int64_t>(seq.tokens.size());
      rows.add_row({results::CellValue{next_id}, chosen.tasks[s.task]->id, results::CellValue{s.index},
                    results::CellValue{static_cast<int64_t>(requests[k - first].prompt.size())},
                    results::CellValue{static_cast<int64_t>(seq.tokens.size())}, policy::finish_reason_name(seq.finish_reason)});
      text_ids.push_back(next_id++);
      texts.push_back(results::to_valid_utf8(seq.text));
    }
    writer.append(kSamplesTable, rows);
    writer.put_texts(kCompletionStore, text_ids, texts);
    writer.flush();
    tasks_done.insert(chunk_tasks.begin(), chunk_tasks.end());
    std::cerr << fmt::format("crl eval-model: sampled {} | {} completions, {} tokens in {:.1f} s ({:.0f} tokens/s)\n",
                             progress_text(tasks_done.size(), total_tasks, start, "tasks"), end - first, tokens,
                             result.prefill_seconds + result.decode_seconds,
                             result.decode_seconds > 0 ? static_cast<double>(tokens) / result.decode_seconds : 0.0);
    first = end;
  }
}

// ---- the summary -------------------------------------------------------------------------------

struct TaskSummary {
  std::string task;
  int64_t samples = 0, correct = 0, internal_errors = 0;
  double best_speedup = NAN;
  std::map<std::string, int64_t> statuses;
};

// Per chosen task, over the file's latest verdict of each of its samples (a verdict judged again on
// --resume replaces its internal_error).
std::vector<TaskSummary> summarize(const std::string& path, const TaskPrompts& chosen) {
  const results::ResultsReader reader(path);
  const auto tasks = reader.column_as<std::string>("verdicts", "task");
  const auto names = reader.column_as<std::string>("verdicts", "candidate");
  const auto statuses = reader.column_as<std::string>("verdicts", "status");
  const auto speedups = reader.column_as<double>("verdicts", "speedup");
  std::map<std::pair<std::string, std::string>, size_t> latest;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto [it, fresh] = latest.emplace(std::make_pair(tasks[i], names[i]), i);
    if (!fresh && (statuses[i] != "internal_error" || statuses[it->second] == "internal_error")) it->second = i;
  }
  std::map<std::string, TaskSummary> by_task;
  for (const Task* t : chosen.tasks) by_task[t->id].task = t->id;
  for (const auto& [key, i] : latest) {
    const auto it = by_task.find(key.first);
    if (it == by_task.end()) continue;
    TaskSummary& s = it->second;
    ++s.samples;
    ++s.statuses[statuses[i]];
    if (statuses[i] == "internal_error") ++s.internal_errors;
    if (statuses[i] == "ok" && std::isfinite(speedups[i]) && speedups[i] > 0) {
      ++s.correct;
      s.best_speedup = std::isnan(s.best_speedup) ? speedups[i] : std::max(s.best_speedup, speedups[i]);
    }
  }
  std::vector<TaskSummary> out;
  for (const Task* t : chosen.tasks) out.push_back(by_task[t->id]);
  return out;
}

nlohmann::json summary_json(const std::vector<TaskSummary>& per_task, const std::string& path, const std::string& model,
                            int64_t samples_per_task, double seconds_sampling, double seconds_judging) {
  nlohmann::json tasks = nlohmann::json::array();
  int64_t samples = 0, correct = 0, internal = 0, solved = 0, faster = 0;
  double pass_at_1 = 0;
  for (const TaskSummary& s : per_task) {
    tasks.push_back({{"task", s.task}, {"samples", s.samples}, {"correct", s.correct},
                     {"best_speedup", std::isnan(s.best_speedup) ? nlohmann::json() : nlohmann::json(s.best_speedup)},
                     {"statuses", s.statuses}});
    samples += s.samples;
    correct += s.correct;
    internal += s.internal_errors;
    solved += s.correct > 0 ? 1 : 0;
    faster += s.best_speedup > 1.0 ? 1 : 0;
    const int64_t counted = s.samples - s.internal_errors;
    pass_at_1 += counted > 0 ? static_cast<double>(s.correct) / static_cast<double>(counted) : 0.0;
  }
  const double n = static_cast<double>(std::max<size_t>(per_task.size(), 1));
  return {{"results", path},
          {"model", model},
          {"tasks", per_task.size()},
          {"samples_per_task", samples_per_task},
          {"samples", samples},
          {"correct", correct},
          {"internal_errors", internal},
          {"tasks_with_correct", solved},
          {"pass_at_1", pass_at_1 / n},
          {"fast_1", static_cast<double>(faster) / n},
          {"fast_p_over", "the chosen tasks (crl report: over the level's tasks)"},
          {"seconds_sampling", seconds_sampling},
          {"seconds_judging", seconds_judging},
          {"per_task", tasks}};
}

void print_summary(const nlohmann::json& summary) {
  TextTable table({"task", "samples", "correct", "best speedup", "statuses"});
  for (const auto& t : summary["per_task"]) {
    std::string statuses;
    for (const auto& [status, count] : t["statuses"].items()) statuses += fmt::format("{}{} {}", statuses.empty() ? "" : ", ", status, count.get<int64_t>());
    table.add_row({t["task"].get<std::string>(), std::to_string(t["samples"].get<int64_t>()), std::to_string(t["correct"].get<int64_t>()),
                   t["best_speedup"].is_null() ? "-" : fmt::format("{:.3f}", t["best_speedup"].get<double>()), statuses});
  }
  std::cout << table.str();
  std::cout << fmt::format("{} tasks x {} samples of {}: {} correct of {}, pass@1 {:.3f}, tasks with a correct program {}, "
                           "fast_1 {:.3f} (over these tasks); sampled in {:.1f} s, judged in {:.1f} s\n"
                           "results in {}; `crl report {} --out DIR` gives pass@k, fast_p over the level's tasks and the rest\n",
                           summary["tasks"].get<size_t>(), summary["samples_per_task"].get<int64_t>(), summary["model"].get<std::string>(),
                           summary["correct"].get<int64_t>(), summary["samples"].get<int64_t>(), summary["pass_at_1"].get<double>(),
                           summary["tasks_with_correct"].get<int64_t>(), summary["fast_1"].get<double>(),
                           summary["seconds_sampling"].get<double>(), summary["seconds_judging"].get<double>(),
                           summary["results"].get<std::string>(), summary["results"].get<std::string>());
}

// ---- the command -------------------------------------------------------------------------------

// Every sample of this run: G per chosen task, numbered on from the file's with --append; those the
// file holds a verdict (or a completion) of are marked so.
std::vector<Sample> plan_samples(const EvalModelOptions& o, const TaskPrompts& chosen, FileContents& file) {
  std::vector<Sample> samples;
  for (size_t t = 0; t < chosen.tasks.size(); ++t) {
    const std::string& id = chosen.tasks[t]->id;
    const int64_t first = o.results.append ? file.samples_per_task[id] : 0;
    for (int64_t s = first; s < first + o.samples; ++s) {
      Sample sample{.task = t, .index = s};
      if (!o.results.append) {
        sample.judged = file.verdicts.take(id, sample_name(s));
        if (const auto it = file.completions.find({id, s}); it != file.completions.end()) {
          sample.completion = it->second;
          sample.have_completion = true;
        }
      }
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

void release_gpu_memory() {
#if CRL_HAVE_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

int run_eval_model(EvalModelOptions o) {
  refuse_unasked_append(o.results);
  const eval::EvalOptions options = eval_options_of(o.judge, 0);  // --backend cuda without a GPU: refused now
  o.selection.suite_dir = o.judge.suite_dir;
  const TaskPrompts chosen = select_task_prompts(o.selection, "crl eval-model");
  const fs::path model_dir = fs::absolute(o.model_dir).lexically_normal();
  const rl::PromptFormat format = prompt_format_of(o, chosen.job, model_dir);
  const std::string device = !o.sampling.device.empty() ? o.sampling.device : options.backend == Backend::cuda ? "cuda" : "cpu";

  CompilerOptions compiler_options;
  compiler_options.cache_dir = absolute_cache_dir(o.judge.cache_dir);
  Compiler compiler(compiler_options);
  const nlohmann::json eval_options = eval_options_json(options, compiler);
  const nlohmann::json settings = generation_settings(o, model_dir.string(), format);
  FileContents file;
  std::error_code ec;
  if ((o.results.resume || o.results.append) && fs::exists(o.results.h5, ec)) {
    file = read_file_contents(o.results.h5, eval_options, settings, o.results.resume ? "--resume" : "--append");
  }
  std::vector<Sample> samples = plan_samples(o, chosen, file);
  const size_t judged_before = static_cast<size_t>(std::count_if(samples.begin(), samples.end(), [](const Sample& s) { return s.judged; }));
  if (o.results.resume) {
    std::cerr << fmt::format("crl eval-model --resume: {} holds verdicts of {} of the {} samples; sampling and judging the rest\n",
                             o.results.h5, judged_before, samples.size());
  }

  Sampler sampler = load_sampler(o, model_dir, format, device);  // a bad model folder: exit 3 before the file exists
  results::ResultsWriter writer(o.results.h5);
  write_results_meta(writer, options, eval_options, file.verdicts.commits);
  writer.set_meta("command", "eval-model");
  writer.set_meta_json("generation", settings);
  nlohmann::json task_ids = nlohmann::json::array();
  for (const Task* t : chosen.tasks) task_ids.push_back(t->id);
  writer.set_meta_json("eval_model_tasks", task_ids);
  if (!o.selection.job.empty()) writer.set_meta("job_file", o.selection.job);
  writer.declare_table(kSamplesTable, samples_schema());
  writer.flush();

  const auto sampling_start = std::chrono::steady_clock::now();
  sample_missing(o, chosen, samples, sampler, model_dir, writer);
  const double seconds_sampling = seconds_since(sampling_start);
  { Sampler freed = std::move(sampler); }  // the evaluator's workers get the GPU's memory
  release_gpu_memory();

  std::vector<Candidate> candidates;
  for (const Sample& s : samples) {
    if (s.judged) continue;
    const std::string& task = chosen.tasks[s.task]->id;
    candidates.push_back(candidate_of_completion(task, sample_name(s.index), s.completion, fmt::format("{} sample {}", task, s.index)));
  }
  check_candidates_against(*chosen.suite, candidates);
  const auto judging_start = std::chrono::steady_clock::now();
  eval::Evaluator evaluator(options, compiler);
  const std::vector<eval::Verdict> verdicts =
      judge_candidates(candidates, {*chosen.suite, evaluator, compile_window(o.judge, options), &writer, nullptr, "crl eval-model"});
  const double seconds_judging = seconds_since(judging_start);
  writer.close();

  const nlohmann::json summary =
      summary_json(summarize(o.results.h5, chosen), o.results.h5, model_dir.string(), o.samples, seconds_sampling, seconds_judging);
  if (o.json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    print_summary(summary);
  }
  const InternalErrors internal = report_internal_errors(verdicts, "crl eval-model");
  if (internal.all) return kExitInternal;
  return internal.count > 0 ? kExitFailure : kExitOk;
}

}  // namespace

void add_eval_model_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "eval-model",
      "Evaluate a model: the prompts of a task set (as crl prompt shows them), G samples per task, every one judged, "
      "into a results file that crl report turns into pass@k and fast_p");
  static EvalModelOptions o;
  o.sampling.max_new_tokens = 2048;
  o.sampling.device = "";
  cmd->add_option("--model", o.model_dir,
                  "Model folder (Hugging Face format: config.json, *.safetensors, tokenizer.json), or a checkpoint of crl run "
                  "(RUN/checkpoints/step-N)")
      ->required()
      ->check(existing_input(PathKind::directory, "--model"));
  add_task_selection_options(cmd, o.selection, /*with_suite_option=*/false);
  cmd->add_option("--samples,-G", o.samples, "Samples per task (pass@k needs at least k)")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt-format", o.prompt_format,
                  "chat (the model's chat template) or raw (default: the job's prompt_format, else chat where the model "
                  "folder has a chat template)")
      ->check(CLI::IsMember({"chat", "raw"}));
  add_sampling_options(cmd, o.sampling);
  cmd->get_option("--max-new-tokens")->description("Tokens to generate at most, per sample");
  cmd->get_option("--device")->description("cpu, cuda or cuda:N (default: cuda when judging on cuda, else cpu)");
  cmd->add_option("--chunk-tasks", o.chunk_tasks,
                  "Tasks sampled together before their completions are written (default: as many as fill the engine's 256 "
                  "running sequences)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  add_judge_options(cmd, o.judge);
  add_results_file_options(cmd, o.results, "samples");
  cmd->get_option("--h5")->required()->description(
      "The results file: /verdicts (one row per sample, candidate 'sample S'), /samples and its completions, the model "
      "and sampling in /meta");
  cmd->get_option("--append")->description(
      "With --h5: add --samples more samples per task to a file of this model and sampling (numbered on from its own)");
  cmd->add_flag("--json", o.json, "Print the summary as JSON");
  cmd->callback([&exit_code] { exit_code = run_eval_model(o); });
}

}  // namespace crl::cli
