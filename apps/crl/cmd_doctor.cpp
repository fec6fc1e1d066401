// `crl doctor [--json]`: what this machine offers and lacks, and the command that fixes each gap.
#include <fmt/format.h>

#include <iostream>

#include "apps/crl/commands.h"
#include "core/text_table.h"
#include "machine/machine_probe.h"

namespace crl::cli {

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", "Show what this machine offers crl (GPUs, CUDA, NCCL, MPI, HDF5, LibTorch)");
  static bool json = false;
  cmd->add_flag("--json", json, "Print the report as JSON");
  cmd->callback([&exit_code] {
    const MachineReport report = probe_machine();
    if (json) {
      std::cout << report.to_json().dump(2) << "\n";
      exit_code = kExitOk;
      return;
    }
    std::cout << fmt::format("crl doctor on {}\n\n", report.host);
    if (report.gpus.empty()) {
      std::cout << "GPUs: none\n\n";
    } else {
      TextTable gpus({"gpu", "name", "memory", "compute capability", "SMs"});
      for (const auto& g : report.gpus) {
        gpus.add_row({std::to_string(g.index), g.name, fmt::format("{:.1f} GiB", g.memory_gib),
                      fmt::format("{}.{}", g.cc_major, g.cc_minor), std::to_string(g.multiprocessors)});
      }
      std::cout << gpus.str() << "\n";
    }
    TextTable table({"component", "status", "version", "detail"});
    for (const auto& c : report.components) {
      table.add_row({c.name, c.ok ? "ok" : "missing", c.version, c.detail});
    }
    std::cout << table.str();
    bool any_fix = false;
    for (const auto& c : report.components) {
      if (c.ok || c.fix.empty()) continue;
      if (!any_fix) std::cout << "\nTo fix:\n";
      any_fix = true;
      std::cout << fmt::format("  {}: {}\n", c.name, c.fix);
    }
    exit_code = kExitOk;
  });
}

}  // namespace crl::cli
