// `crl run JOB.yaml [--run-dir DIR]`: the crl job (trainer and evaluator MPI ranks, the job
// file's stages, results in DIR/results.h5). Start it with mpirun or srun:
//   mpirun -np 4 crl run jobs/ci.yaml        (2 trainers from the job file, 2 evaluators)
// A failure on any rank ends the whole job (MPI_Abort) after that rank logged why. SIGUSR1,
// SIGTERM or SIGINT stop it at the next step boundary with a checkpoint (exit code 5); the same
// command resumes it (docs/training.md, "Stopping and resuming").
#include <mpi.h>
#include <spdlog/spdlog.h>

#include "apps/crl/commands.h"
#include "core/error.h"
#include "dist/mpi_roles.h"
#include "rl/job.h"
#include "rl/job_config.h"

namespace crl::cli {

void add_run_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("run", "Run a crl job (sft, selftrain, crl stages) on the MPI ranks of mpirun or srun");
  auto job_path = std::make_shared<std::string>();
  auto options = std::make_shared<rl::RunOptions>();
  cmd->add_option("job", *job_path, "Job file (YAML; keys: jobs/README.md)")->required();
  cmd->add_option("--run-dir", options->run_dir, "Folder for results.h5 and checkpoints/ (default runs/<job name>)");
  auto model = std::make_shared<std::string>();
  cmd->add_option("--model", *model, "Hugging Face checkpoint folder to start from, instead of the job file's `model`");
  cmd->add_option("--allow-config-change", options->allow_config_change,
                  "Resume although these job file keys changed since the checkpoint (KEY[,KEY...], e.g. stages[1].lr)")
      ->delimiter(',');
  cmd->callback([&exit_code, job_path, options, model] {
    dist::MpiSession mpi(nullptr, nullptr);
    const auto abort_job = [&](int code, const char* kind, const std::string& what) {
      spdlog::error("{}{}", kind, what);
      if (mpi.size() > 1) MPI_Abort(MPI_COMM_WORLD, code);  // the other ranks would wait forever
      exit_code = code;
    };
    try {
      rl::JobConfig job = rl::load_job_config(*job_path);
      if (!model->empty()) {
        job.model = *model;
        job.as_json["model"] = *model;  // /meta records what ran
      }
      const rl::JobOutcome outcome = rl::run_job(job, *options);
      exit_code = outcome.stopped ? kExitStopped : kExitOk;
    } catch (const InputError& e) {
      abort_job(kExitInputError, "", e.what());
    } catch (const Error& e) {
      abort_job(kExitInternal, "", e.what());
    } catch (const std::exception& e) {
      abort_job(kExitInternal, "unexpected error: ", e.what());
    }
  });
}

}  // namespace crl::cli
