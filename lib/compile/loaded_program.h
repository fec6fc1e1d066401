// A compiled program's shared library, loaded with dlopen: its ABI is checked, crl_forward resolved.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "compile/program_abi.h"

namespace crl {

class LoadedProgram {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL). Throws IoError if the library cannot be loaded and InputError if
  // it lacks the ABI symbols or was built for another ABI version (the message says which).
  explicit LoadedProgram(const std::string& library_path);
  ~LoadedProgram();
  LoadedProgram(LoadedProgram&& other) noexcept;
  LoadedProgram& operator=(LoadedProgram&& other) noexcept;
  LoadedProgram(const LoadedProgram&) = delete;
  LoadedProgram& operator=(const LoadedProgram&) = delete;

  // Runs the program's forward. Throws crl::Error "<library>: forward failed: <program's text>"
  // when the program reports an error (a TORCH_CHECK, an exception, a wrong argument count).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& args) const;

  const std::string& path() const { return path_; }
  std::string abi_version() const;

 private:
  std::string path_;
  void* handle_ = nullptr;
  ProgramForwardFn forward_ = nullptr;
  ProgramAbiVersionFn abi_version_ = nullptr;
};

}  // namespace crl
