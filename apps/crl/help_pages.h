// crl's help pages, written at build time so that `crl [SUBCOMMAND...] --help` is answered by
// build/apps/crl/crl (crl_exec.c) without starting crl-main, whose LibTorch takes 0.5 to 3 s to load.
//
//   build/apps/crl/crl-help/crl              what `crl --help` prints
//   build/apps/crl/crl-help/crl.tasks        `crl tasks --help`
//   build/apps/crl/crl-help/crl.tasks.list   `crl tasks list --help`
//
// A page is the subcommand path joined by '.', each name of [a-z0-9-] (crl_exec.c asks for no other);
// its text is CLI11's own answer to that --help, byte for byte.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>

namespace crl::cli {

// crl-main's hidden first argument that writes the pages: `crl-main --write-help-pages DIR`.
inline constexpr const char* kWriteHelpPagesFlag = "--write-help-pages";

// Replaces DIR with one page per subcommand path of `app` (every subcommand already added). Returns
// the number of pages; throws IoError naming the file it could not write.
int write_help_pages(CLI::App& app, const std::filesystem::path& dir);

}  // namespace crl::cli
