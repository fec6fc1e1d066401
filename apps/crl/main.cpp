// crl: the command-line entry point. `crl --help` lists the subcommands.
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>

#include "apps/crl/commands.h"
#include "apps/crl/exit_code.h"
#include "apps/crl/help_pages.h"
#include "core/log.h"

int main(int argc, char** argv) {
  using namespace crl::cli;
  // Named, not taken from argv[0]: the help pages written at build time (help_pages.h) say "crl" as
  // crl-main does when it answers itself.
  CLI::App app{"crl: contrastive RL that teaches a code LLM to write faster GPU programs", "crl"};
  app.require_subcommand(1);
  std::string log_level = "info";
  crl::init_logging(log_level);
  app.add_option("--log-level", log_level, "debug, info, warn or error (before the subcommand)")
      ->capture_default_str()
      ->each([](const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); });
  int exit_code = kExitOk;
  add_doctor_command(app, exit_code);
  add_eval_command(app, exit_code);
  add_tasks_command(app, exit_code);
  add_generate_command(app, exit_code);
  add_init_model_command(app, exit_code);
  add_run_command(app, exit_code);
  add_data_command(app, exit_code);
  add_report_command(app, exit_code);
  add_results_command(app, exit_code);
  add_prompt_command(app, exit_code);
  add_eval_model_command(app, exit_code);

  if (argc == 3 && std::strcmp(argv[1], kWriteHelpPagesFlag) == 0) {  // the build's step (apps/crl/CMakeLists.txt)
    try {
      std::cout << "crl: " << write_help_pages(app, argv[2]) << " help pages in " << argv[2] << "\n";
      return kExitOk;
    } catch (const std::exception& e) {
      std::cerr << "crl: " << e.what() << "\n";
      return kExitInternal;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    const ExitDecision exit = decide_exit(e);
    spdlog::error("{}", exit.message);
    return exit.code;
  }
  return exit_code;
}
