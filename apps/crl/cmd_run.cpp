// `crl run JOB.yaml [--run-dir DIR]`: the crl job (trainer and evaluator MPI ranks, the job
// file's stages, results in DIR/results.h5). Start it with mpirun or srun:
//   mpirun -np 4 crl run jobs/ci.yaml        (2 trainers from the job file, 2 evaluators)
// A failure on any rank ends the whole job (MPI_Abort) after that rank logged why. SIGUSR1,
// SIGTERM or SIGINT stop it at the next step boundary with a checkpoint (exit code 5); the same
// command resumes it (docs/training.md, "Stopping and resuming"); evaluation failing for every
// program (eval.max_failed_steps) stops it likewise, with exit code 4.
// Started by hand (no mpirun or srun around it) it starts mpirun itself (job_launch.h), so that a
// Ctrl-C or SIGTERM stops the job with a checkpoint; with no job file it runs the built-in default
// job (default_job.h) that way.
#include <mpi.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "apps/crl/commands.h"
#include "apps/crl/default_job.h"
#include "apps/crl/exit_code.h"
#include "apps/crl/job_launch.h"
#include "core/error.h"
#include "core/process_env.h"
#include "core/read_file.h"
#include "dist/mpi_roles.h"
#include "policy/config.h"
#include "policy/model.h"
#include "policy/tokenizer.h"
#include "results/results_reader.h"
#include "rl/chat_template.h"
#include "rl/job.h"
#include "rl/job_config.h"
#include "rl/job_tables.h"
#include "rl/sft_data.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

// The job's model folder as the trainers will read it (config.json, the weights' headers against
// it, tokenizer.json, the chat template for prompt_format chat), without loading a tensor; an error
// names the job file and the folder.
void check_model_folder(const rl::JobConfig& job) {
  const std::filesystem::path model = job.model;
  const std::string where = fmt::format("{}: model '{}'", job.path, job.model);
  std::error_code ec;
  if (!std::filesystem::is_directory(model, ec)) {
    throw InputError(fmt::format("{} {}: give a Hugging Face checkpoint folder (config.json, model.safetensors, tokenizer.json)",
                                 where, std::filesystem::exists(model, ec) ? "is not a folder" : "does not exist"));
  }
  try {
    const policy::ModelConfig config = policy::check_model_weights(model);
    const policy::Tokenizer tokenizer = policy::Tokenizer::from_file(model / "tokenizer.json");
    if (tokenizer.vocab_size() > config.vocab_size) {
      throw InputError(fmt::format("{}: the tokenizer has {} ids but config.json's vocab_size is {}: the model cannot embed them",
                                   (model / "tokenizer.json").string(), tokenizer.vocab_size(), config.vocab_size));
    }
    if (job.prompt_format == rl::PromptFormat::kChat) rl::ChatTemplate::from_model_dir(model);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  } catch (const IoError& e) {
    throw IoError(fmt::format("{}: {}", where, e.what()), e.error_number());
  }
}

// What the job will read from outside, checked before any rank starts work, so that a bad one is
// exit 3 naming it (these readers live in lib/rl, which trusts them): the run folder, an earlier
// run's results.h5 (its tables' columns and types, /meta's JSON), the tasks and held-out tasks
// (one in both is refused), the model folder (config.json,
// weights, tokenizer), and the SFT data (read whole as the sft stage reads it, so that a bad line is
// found before the models load, not when its stage begins).
void check_run_inputs(const rl::JobConfig& job, const rl::RunOptions& options) {
  // As rl::run_job chooses it.
  const std::string run_dir = options.run_dir.empty() ? "runs/" + job.name : options.run_dir;
  std::error_code ec;
  if (std::filesystem::exists(run_dir, ec) && !std::filesystem::is_directory(run_dir, ec)) {
    throw InputError(fmt::format("run folder '{}' is a file: give --run-dir a folder (it is made if missing)", run_dir));
  }
  const std::string results = run_dir + "/results.h5";
  if (std::filesystem::exists(results, ec)) {
    const results::ResultsReader reader(results);
    // A file of an older crl lacks the telemetry columns; the job adds them.
    const results::TableSchema& telemetry = rl::steps_telemetry_columns();
    const results::TableSchema steps(rl::steps_schema().begin(), rl::steps_schema().end() - static_cast<std::ptrdiff_t>(telemetry.size()));
    reader.validate({.tables = {{.table = "steps", .columns = steps, .optional = telemetry},
                                {.table = "rollouts", .columns = rl::rollouts_schema()},
                                {.table = "validation", .columns = rl::rollouts_schema()}},
                     .meta = {{.key = "job_config", .shape = results::MetaShape::json_object}}});
  }
  // The tasks as the ranks select them: an unknown id, or a held-out task that is also trained on,
  // is bad input before any rank starts.
  const Suite suite = Suite::load(resolve_suite_dir(job.suite));
  rl::select_validation_tasks(suite, job, rl::select_tasks(suite, job));
  check_model_folder(job);
  for (const auto& stage : job.stages) {
    if (!stage.data.empty()) rl::read_sft_jsonl(stage.data);
  }
}

// The crl that mpirun starts on each rank: build/apps/crl/crl (crl_exec.c) when that started this
// process, so the ranks' stop signals are blocked across their LibTorch load too.
std::string self_executable() {
  const char* self = std::getenv("CRL_SELF");
  return self != nullptr && *self != '\0' ? std::string(self) : std::filesystem::read_symlink("/proc/self/exe").string();
}

// The job file with the --set overrides and --model applied.
rl::JobConfig load_job(const std::string& path, const std::vector<std::string>& overrides, const std::string& model) {
  const std::string base = std::filesystem::path(path).parent_path().string();
  rl::JobConfig job = overrides.empty() ? rl::load_job_config(path)
                                        : rl::parse_job_config(apply_job_overrides(read_file(path, "job file"), path, overrides), path,
                                                               base.empty() ? "." : base);
  if (!model.empty()) {
    job.model = model;
    job.as_json["model"] = model;  // /meta records what ran
  }
  return job;
}

// What crl passes to the command line of the ranks it starts: the user's own options.
struct RunArguments {
  std::string job_path;
  rl::RunOptions options;
  std::string model;
  std::vector<std::string> overrides;
};

// `crl run JOB.yaml` by hand: the job's inputs checked here (exit 3 before any rank starts), then
// mpirun with roles.trainers ranks plus one evaluator (or --ranks).
int launch_job(const RunArguments& a, std::optional<int> ranks, const std::string& self) {
  const rl::JobConfig job = load_job(a.job_path, a.overrides, a.model);
  check_run_inputs(job, a.options);
  const bool evaluates = std::any_of(job.stages.begin(), job.stages.end(), [](const auto& s) { return s.kind != rl::StageKind::kSft; });
  MpirunLaunch launch{self, ranks.value_or(static_cast<int>(job.trainers) + (evaluates ? 1 : 0)), {}};
  if (spdlog::get_level() != spdlog::level::info) {
    launch.args = {"--log-level", std::string(spdlog::level::to_string_view(spdlog::get_level()).data())};
  }
  launch.args.insert(launch.args.end(), {"run", a.job_path});
  if (!a.options.run_dir.empty()) launch.args.insert(launch.args.end(), {"--run-dir", a.options.run_dir});
  if (!a.model.empty()) launch.args.insert(launch.args.end(), {"--model", a.model});
  if (!a.options.allow_config_change.empty()) {
    launch.args.insert(launch.args.end(), {"--allow-config-change", fmt::format("{}", fmt::join(a.options.allow_config_change, ","))});
  }
  for (const std::string& o : a.overrides) launch.args.insert(launch.args.end(), {"--set", o});
  return run_under_mpirun(launch);
}

// Under an mpirun the user started: on SIGINT or SIGTERM Open MPI 4.1's mpirun waits
// odls_base_sigkill_timeout (1 s), SIGTERMs the ranks, waits as long again and SIGKILLs them: a
// step boundary is rarely that near. Raising the timeout delays the ranks' SIGTERM as much.
void warn_about_mpirun_grace(int rank) {
  if (rank != 0 || launch_place().launcher != "mpirun" || std::getenv("CRL_STOPS_FORWARDED") != nullptr ||
      std::getenv("OMPI_MCA_odls_base_sigkill_timeout") != nullptr) {
    return;
  }
  spdlog::warn("under mpirun, a Ctrl-C or SIGTERM to mpirun kills the ranks about 2 s later, before they can checkpoint: stop "
               "with SIGUSR1 to mpirun (kill -USR1 PID), or run `crl run JOB.yaml` without mpirun (crl starts it and turns a "
               "Ctrl-C into a checkpointed stop); checkpoint.every_minutes bounds what a kill loses");
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Run a crl job (sft, selftrain, crl stages) on the MPI ranks of mpirun or srun");
  auto job_path = std::make_shared<std::string>();
  auto options = std::make_shared<rl::RunOptions>();
  cmd->add_option("job", *job_path, "Job file (YAML; keys: jobs/README.md); none: the built-in default job, started under mpirun");
  cmd->add_option("--run-dir", options->run_dir, "Folder for results.h5 and checkpoints/ (default runs/<job name>; without a job file results/default)");
  auto model = std::make_shared<std::string>();
  cmd->add_option("--model", *model, "Hugging Face checkpoint folder to start from, instead of the job file's `model`");
  cmd->add_option("--allow-config-change", options->allow_config_change,
                  "Resume although these job file keys changed since the checkpoint (KEY[,KEY...], e.g. stages[1].lr)")
      ->delimiter(',');
  auto overrides = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--set", *overrides, "KEY=VALUE override of the job file, as its messages print the key or dotted (stages[2].steps=6 or stages.2.steps=6); repeatable");
  auto ranks = std::make_shared<int>(2);
  cmd->add_option("--ranks", *ranks, "Started by hand: MPI ranks for the mpirun crl starts (default: roles.trainers + 1; without a job file 2: 1 trainer, the rest evaluate)")->capture_default_str();
  cmd->callback([&exit_code, job_path, options, model, overrides, ranks, cmd] {
    if (job_path->empty()) {
      DefaultRunOptions d;
      if (!options->run_dir.empty()) d.run_dir = options->run_dir;
      d.ranks = *ranks;
      d.overrides = *overrides;
      d.model = *model;
      exit_code = run_default_job(d, self_executable());
      return;
    }
    const bool by_hand = launch_place().launcher.empty();
    if (cmd->count("--ranks") > 0 && !by_hand) {
      throw CLI::ValidationError("--ranks", "only where crl starts mpirun itself: under mpirun or srun, -np N or -n N chooses the ranks");
    }
    if (by_hand) {
      const std::optional<int> wanted = cmd->count("--ranks") > 0 ? std::optional<int>(*ranks) : std::nullopt;
      if (wanted && *wanted < 1) throw InputError(fmt::format("--ranks is {}: give at least 1", *wanted));
      exit_code = launch_job({*job_path, *options, *model, *overrides}, wanted, self_executable());
      return;
    }
    dist::MpiSession mpi(nullptr, nullptr);
    warn_about_mpirun_grace(mpi.rank());
    const auto abort_job = [&](int code, const char* kind, const std::string& what) {
      spdlog::error("{}{}", kind, what);
      if (mpi.size() > 1) MPI_Abort(MPI_COMM_WORLD, code);  // the other ranks would wait forever
      exit_code = code;
    };
    try {
      const rl::JobConfig job = load_job(*job_path, *overrides, *model);
      check_run_inputs(job, *options);
      const rl::JobOutcome outcome = rl::run_job(job, *options);
      exit_code = outcome.evaluation_failed ? kExitInternal : outcome.stopped ? kExitStopped : kExitOk;
    } catch (const std::exception& e) {
      const ExitDecision exit = decide_exit(e);
      abort_job(exit.code, "", exit.message);
    }
  });
}

}  // namespace crl::cli
