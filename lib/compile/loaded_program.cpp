// dlopen wrapper over compiled programs, with ABI checks and typed errors.
#include "compile/loaded_program.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstring>

#include "core/error.h"

namespace crl {

LoadedProgram::LoadedProgram(const std::string& library_path) : path_(library_path) {
  handle_ = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    throw IoError(fmt::format("cannot load program library '{}': {}", library_path, why ? why : "unknown error"));
  }
  abi_version_ = reinterpret_cast<ProgramAbiVersionFn>(dlsym(handle_, kAbiVersionSymbol));
  forward_ = reinterpret_cast<ProgramForwardFn>(dlsym(handle_, kForwardSymbol));
  if (abi_version_ == nullptr || forward_ == nullptr) {
    dlclose(handle_);
    handle_ = nullptr;
    throw InputError(fmt::format("program library '{}' does not export {} and {} (not built by crl compile?)",
                                 library_path, kForwardSymbol, kAbiVersionSymbol));
  }
  const std::string version = abi_version_();
  if (version != program_abi_version()) {
    dlclose(handle_);
    handle_ = nullptr;
    throw InputError(fmt::format("program library '{}' was built for ABI '{}' but this crl expects '{}': recompile it",
                                 library_path, version, program_abi_version()));
  }
}

LoadedProgram::~LoadedProgram() {
  if (handle_ != nullptr) dlclose(handle_);
}

LoadedProgram::LoadedProgram(LoadedProgram&& other) noexcept
    : path_(std::move(other.path_)), handle_(other.handle_), forward_(other.forward_), abi_version_(other.abi_version_) {
  other.handle_ = nullptr;
  other.forward_ = nullptr;
  other.abi_version_ = nullptr;
}

LoadedProgram& LoadedProgram::operator=(LoadedProgram&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    path_ = std::move(other.path_);
    handle_ = other.handle_;
    forward_ = other.forward_;
    abi_version_ = other.abi_version_;
    other.handle_ = nullptr;
    other.forward_ = nullptr;
    other.abi_version_ = nullptr;
  }
  return *this;
}

std::vector<at::Tensor> LoadedProgram::forward(const std::vector<at::Tensor>& args) const {
  if (forward_ == nullptr) throw Error(fmt::format("program '{}' was moved from or not loaded", path_));
  std::vector<at::Tensor> outputs;
  std::array<char, 4096> error{};
  const int rc = forward_(args.data(), args.size(), &outputs, error.data(), error.size());
  if (rc != 0) {
    error.back() = '\0';
    throw Error(fmt::format("{}: forward failed: {}", path_, error.data()));
  }
  return outputs;
}

std::string LoadedProgram::abi_version() const { return abi_version_ ? abi_version_() : ""; }

}  // namespace crl
