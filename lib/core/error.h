// Typed errors thrown by crl library code; only main() turns them into exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace crl {

// Base of every error crl throws. what() says what failed, where, and (if known) how to fix it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Bad input from outside: a config, a program text, a checkpoint, a message.
class InputError : public Error {
 public:
  using Error::Error;
};

// A file or directory could not be read or written.
class IoError : public Error {
 public:
  using Error::Error;
};

// A call into an external API (CUDA, NCCL, MPI, HDF5, the OS) returned an error.
class ApiError : public Error {
 public:
  ApiError(std::string api, const std::string& message) : Error(message), api_(std::move(api)) {}
  const std::string& api() const { return api_; }

 private:
  std::string api_;
};

// "host h, rank r" for messages: the process's place in a job (rank from mpirun or srun).
std::string process_location();

// Throws ApiError naming the failing call, its source location, this process's rank and host.
[[noreturn]] void throw_api_error(const char* api, const char* call, const std::string& detail,
                                  const char* file, int line);

// Throws IoError for a failed OS call on `path`, with strerror(errno).
[[noreturn]] void throw_io_error(const std::string& what, const std::string& path);

}  // namespace crl
