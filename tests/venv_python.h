// The Python of the venv tools/setup.sh makes (torch, h5py, ...), for tests that run crl's Python.
#pragma once

#include <cstdlib>
#include <string>

namespace crl::testing {

// $CRL_HOME/venv/bin/python3, CRL_HOME defaulting to ~/.local/share/crl as in tools/setup.sh.
inline std::string venv_python() {
  const char* crl_home = std::getenv("CRL_HOME");
  const char* home = std::getenv("HOME");
  const std::string root = crl_home && *crl_home ? crl_home : home ? std::string(home) + "/.local/share/crl" : "";
  return root + "/venv/bin/python3";
}

}  // namespace crl::testing
