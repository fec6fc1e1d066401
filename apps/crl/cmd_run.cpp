// `crl run JOB.yaml [--run-dir DIR]`: the crl job (trainer and evaluator MPI ranks, the job
// file's stages, results in DIR/results.h5). Start it with mpirun or srun:
//   mpirun -np 4 crl run jobs/ci.yaml        (2 trainers from the job file, 2 evaluators)
// A failure on any rank ends the whole job (MPI_Abort) after that rank logged why. SIGUSR1,
// SIGTERM or SIGINT stop it at the next step boundary with a checkpoint (exit code 5); the same
// command resumes it (docs/training.md, "Stopping and resuming"); evaluation failing for every
// program (eval.max_failed_steps) stops it likewise, with exit code 4.
// With no job file it runs the built-in default job (default_job.h), starting mpirun itself.
#include <mpi.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "apps/crl/commands.h"
#include "apps/crl/default_job.h"
#include "apps/crl/exit_code.h"
#include "core/error.h"
#include "core/read_file.h"
#include "dist/mpi_roles.h"
#include "policy/config.h"
#include "results/results_reader.h"
#include "rl/job.h"
#include "rl/job_config.h"
#include "rl/job_tables.h"
#include "rl/sft_data.h"

namespace crl::cli {
namespace {

// What the job will read from outside, checked before any rank starts work, so that a bad one is
// exit 3 naming it (these readers live in lib/rl, which trusts them): the run folder, an earlier
// run's results.h5 (its tables' columns and types, /meta's JSON), the model folder and its
// config.json, and the SFT data (read whole as the sft stage reads it, so that a bad line is
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
    reader.validate({.tables = {{.table = "steps", .columns = rl::steps_schema()},
                                {.table = "rollouts", .columns = rl::rollouts_schema()}},
                     .meta = {{.key = "job_config", .shape = results::MetaShape::json_object}}});
  }
  if (!std::filesystem::is_directory(job.model, ec)) {
    throw InputError(fmt::format("{}: model '{}' {}: give a Hugging Face checkpoint folder (config.json, "
                                 "model.safetensors, tokenizer.json)",
                                 job.path, job.model, std::filesystem::exists(job.model, ec) ? "is not a folder" : "does not exist"));
  }
  policy::load_model_config(job.model);  // DIR/config.json, checked whole
  for (const auto& stage : job.stages) {
    if (!stage.data.empty()) rl::read_sft_jsonl(stage.data);
  }
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
  cmd->add_option("--set", *overrides, "KEY=VALUE override of the job file (dotted path, e.g. stages.2.steps=6); repeatable");
  auto ranks = std::make_shared<int>(2);
  cmd->add_option("--ranks", *ranks, "Without a job file: MPI ranks to start (1 trainer, the rest evaluate)")->capture_default_str();
  cmd->callback([&exit_code, job_path, options, model, overrides, ranks, cmd] {
    if (job_path->empty()) {
      DefaultRunOptions d;
      if (!options->run_dir.empty()) d.run_dir = options->run_dir;
      d.ranks = *ranks;
      d.overrides = *overrides;
      d.model = *model;
      exit_code = run_default_job(d, std::filesystem::read_symlink("/proc/self/exe").string());
      return;
    }
    if (cmd->count("--ranks") > 0) throw CLI::ValidationError("--ranks", "only without a job file: mpirun -np N chooses the ranks");
    dist::MpiSession mpi(nullptr, nullptr);
    const auto abort_job = [&](int code, const char* kind, const std::string& what) {
      spdlog::error("{}{}", kind, what);
      if (mpi.size() > 1) MPI_Abort(MPI_COMM_WORLD, code);  // the other ranks would wait forever
      exit_code = code;
    };
    try {
      const std::string base = std::filesystem::path(*job_path).parent_path().string();
      rl::JobConfig job = overrides->empty()
                              ? rl::load_job_config(*job_path)
                              : rl::parse_job_config(apply_job_overrides(read_file(*job_path, "job file"), *job_path, *overrides),
                                                     *job_path, base.empty() ? "." : base);
      if (!model->empty()) {
        job.model = *model;
        job.as_json["model"] = *model;  // /meta records what ran
      }
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
