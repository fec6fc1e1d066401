// The ABI version string, which names the LibTorch this crl was built against (set by CMake).
#include "compile/program_abi.h"

#ifndef CRL_TORCH_VERSION
#error "CRL_TORCH_VERSION must be defined by the build (lib/compile/CMakeLists.txt)"
#endif

namespace crl {

const char* program_abi_version() {
  static const std::string version =
      "crl-program-abi/" + std::to_string(kProgramAbiNumber) + " libtorch/" CRL_TORCH_VERSION;
  return version.c_str();
}

}  // namespace crl
