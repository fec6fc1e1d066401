// How an evaluation ends short of ok: one Failure type (status, hack kind, message, and what it
// costs the processes), and Result<T>, a stage's value or its Failure.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "eval/hack_kind.h"
#include "eval/verdict.h"

namespace crl::eval {

struct Failure {
  // What the failure costs beyond the verdict: a worker whose request failed is killed (it may
  // still run, or hold the GPU); a judge that failed is dropped (the next evaluation starts one).
  enum class Cleanup { none, kill_worker, drop_judge };

  VerdictStatus status = VerdictStatus::kInternalError;
  HackKind hack = HackKind::none;  // set exactly when status is kHack
  std::string message;
  Cleanup cleanup = Cleanup::none;
  bool out_of_memory = false;  // the failed request ran out of its process's device memory

  static Failure of(VerdictStatus status, std::string message, Cleanup cleanup = Cleanup::none) {
    return Failure{status, HackKind::none, std::move(message), cleanup, false};
  }
  static Failure hack_found(HackKind kind, std::string message) {
    return Failure{VerdictStatus::kHack, kind, std::move(message), Cleanup::none, false};
  }
};

// A stage's value, or why the evaluation ends there.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}               // NOLINT: implicit, as std::expected
  Result(Failure failure) : state_(std::move(failure)) {}     // NOLINT
  explicit operator bool() const { return std::holds_alternative<T>(state_); }
  T& operator*() { return std::get<T>(state_); }
  const T& operator*() const { return std::get<T>(state_); }
  T* operator->() { return &std::get<T>(state_); }
  const T* operator->() const { return &std::get<T>(state_); }
  const Failure& failure() const { return std::get<Failure>(state_); }

 private:
  std::variant<T, Failure> state_;
};

}  // namespace crl::eval
