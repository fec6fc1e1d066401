// Where the policy tests find the "golden" Python that has Hugging Face's libraries (transformers,
// peft, safetensors): $CRL_GOLDEN_PYTHON, else the shared venv tools/setup.sh fills
// ($CRL_HOME/venv, default ~/.local/share/crl/venv), else ~/.local/share/crl/golden-venv; the
// first whose python imports all three. Empty when none does (the tests then skip, saying so).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace crl::policy::testing {

inline std::filesystem::path golden_python() {
  static const std::filesystem::path found = [] {
    if (const char* env = std::getenv("CRL_GOLDEN_PYTHON"); env != nullptr && *env != '\0') {
      return std::filesystem::path(env);
    }
    const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "/root";
    const char* crl_home = std::getenv("CRL_HOME");
    const std::string shared = (crl_home && *crl_home) ? crl_home : home + "/.local/share/crl";
    for (const std::string venv : {shared + "/venv", home + "/.local/share/crl/golden-venv"}) {
      const std::filesystem::path python = venv + "/bin/python3";
      if (!std::filesystem::exists(python)) continue;
      if (run_command({python.string(), "-c", "import transformers, peft, safetensors"}).ok()) return python;
    }
    return std::filesystem::path();
  }();
  return found;
}

}  // namespace crl::policy::testing
