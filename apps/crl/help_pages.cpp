// write_help_pages: every subcommand's --help, as CLI11 prints it, into one file each (help_pages.h).
#include "apps/crl/help_pages.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/remove_tree.h"

namespace crl::cli {
namespace {

namespace fs = std::filesystem;

// The names crl_exec.c accepts in a page's path: nothing that could leave the folder or need quoting.
bool is_page_name(const std::string& name) {
  return !name.empty() && name[0] != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// What `crl PATH... --help` prints: the app parses exactly that and answers as main() does.
std::string help_text(CLI::App& app, const std::vector<std::string>& path) {
  std::vector<std::string> args = {"--help"};
  args.insert(args.end(), path.rbegin(), path.rend());  // CLI11 takes them last first
  try {
    app.parse(std::move(args));
  } catch (const CLI::CallForHelp& e) {
    std::ostringstream out, err;
    app.exit(e, out, err);
    return out.str();
  }
  throw Error(fmt::format("crl {} --help: CLI11 did not answer with help", fmt::join(path, " ")));
}

void write_pages(CLI::App& app, CLI::App& node, std::vector<std::string>& path, const fs::path& dir, int& pages) {
  std::string name = "crl";
  for (const auto& part : path) name += "." + part;
  write_file_atomically(dir / name, help_text(app, path), /*durable=*/false);
  ++pages;
  const std::function<bool(CLI::App*)> every = [](CLI::App*) { return true; };
  for (CLI::App* sub : node.get_subcommands(every)) {
    if (!is_page_name(sub->get_name())) {
      throw Error(fmt::format("subcommand '{}' of crl {}: a help page's name is [a-z0-9-] only (apps/crl/help_pages.h)",
                              sub->get_name(), fmt::join(path, " ")));
    }
    path.push_back(sub->get_name());
    write_pages(app, *sub, path, dir, pages);
    path.pop_back();
  }
}

}  // namespace

int write_help_pages(CLI::App& app, const fs::path& dir) {
  remove_tree(dir);  // no page of a subcommand that is gone
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create the help pages' folder: {}", dir.string(), ec.message()), ec.value());
  std::vector<std::string> path;
  int pages = 0;
  write_pages(app, app, path, dir, pages);
  return pages;
}

}  // namespace crl::cli
