// Where the policy tests find the "golden" Python that has Hugging Face's libraries (README):
// $CRL_GOLDEN_PYTHON, else ~/.local/share/crl/golden-venv/bin/python3; empty when neither exists.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace crl::policy::testing {

inline std::filesystem::path golden_python() {
  if (const char* env = std::getenv("CRL_GOLDEN_PYTHON"); env != nullptr && *env != '\0') return env;
  const std::filesystem::path venv =
      std::filesystem::path(std::getenv("HOME") ? std::getenv("HOME") : "/root") / ".local/share/crl/golden-venv/bin/python3";
  return std::filesystem::exists(venv) ? venv : std::filesystem::path();
}

}  // namespace crl::policy::testing
