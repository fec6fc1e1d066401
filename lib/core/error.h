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

// A file or directory could not be read or written. `error_number` is the OS's errno when an
// OS call failed (0 when none did): it tells a path the user got wrong from a failing machine.
class IoError : public Error {
 public:
  explicit IoError(const std::string& message, int error_number = 0) : Error(message), error_number_(error_number) {}
  int error_number() const { return error_number_; }

 private:
  int error_number_ = 0;
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

// Throws IoError for a failed OS call on `path`, with strerror(errno) (and errno kept).
[[noreturn]] void throw_io_error(const std::string& what, const std::string& path);

// True for the errno values that say a path given to crl is wrong, not the machine: it does not
// exist, is of the wrong kind (a file for a folder, a folder for a file), loops, is too long, or
// may not be opened or written by this user. crl's exit 3 (bad input) rather than 4.
bool is_path_error(int error_number);

}  // namespace crl
