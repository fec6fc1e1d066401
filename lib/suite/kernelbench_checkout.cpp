// Reading a task's module from a KernelBench checkout.
#include "suite/kernelbench_checkout.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "core/read_file.h"

namespace crl {

std::string read_kernelbench_module(const std::string& dir, const std::string& task_id) {
  const auto slash = task_id.find('/');
  const std::string level = task_id.substr(0, slash);
  const std::string problem = std::to_string(std::stoi(task_id.substr(slash + 1, 3)));  // "001_x" -> "1"
  for (const auto& base : {std::filesystem::path(dir) / "KernelBench" / level, std::filesystem::path(dir) / level}) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(base, error)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(problem + "_", 0) == 0 && entry.path().extension() == ".py") return read_input_file(entry.path().string(), "KernelBench module");
    }
  }
  throw IoError(fmt::format("{}: no KernelBench module for {} ({}/{}_*.py, or under KernelBench/)", dir, task_id, level, problem));
}

}  // namespace crl
