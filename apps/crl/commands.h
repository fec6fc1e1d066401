// Registration of crl's subcommands; each cmd_*.cpp adds one to the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace crl::cli {

// Exit codes every subcommand uses, so scripts can tell failures apart.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,     // the command ran and found a problem (e.g. a check failed)
  kExitUsage = 2,       // bad arguments
  kExitInputError = 3,  // bad input file, config or program
  kExitInternal = 4,    // an unexpected error inside crl or an API it calls
  kExitStopped = 5,     // crl run: stopped by a signal at a step boundary, checkpointed; run it again to resume
};

// Each adds its subcommand; the callback it installs sets `exit_code`.
void add_doctor_command(CLI::App& app, int& exit_code);
void add_eval_command(CLI::App& app, int& exit_code);
void add_tasks_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_init_model_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);
void add_data_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_results_command(CLI::App& app, int& exit_code);
void add_prompt_command(CLI::App& app, int& exit_code);
void add_eval_model_command(CLI::App& app, int& exit_code);

}  // namespace crl::cli
