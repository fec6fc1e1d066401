// The evaluator's side of a timed batch's turns (turn_server.h).
#include "eval/turn_server.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"
#include "core/statistics.h"

namespace crl::eval {
namespace {

// Each output of each call is sampled in this many places of this many bytes (or whole, if smaller):
// a call that returned memory it fills later differs from its final bytes in some of them unless
// its outputs are almost all one value (then a correct program need not compute much either).
constexpr int kSamplesPerOutput = 4;
constexpr uint64_t kSampleBytes = 64;
// The evaluator stops waiting for a call only when the batch's request ends (stop()); this bounds a
// thread that outlived it.
constexpr double kTurnWaitSeconds = 24 * 3600;

}  // namespace

TurnServer::TurnServer(const TurnPlace& place, std::vector<int64_t> slots, uint64_t sample_seed)
    : place_(place),
      page_(reinterpret_cast<worker::TurnPage*>(place.arena + place.layout->turn_page_offset())),
      slots_(std::move(slots)),
      sample_seed_(sample_seed),
      turns_(slots_.size()) {}

TurnServer::~TurnServer() { stop(); }

void TurnServer::start() {
  page_->done.store(0, std::memory_order_relaxed);
  page_->output_count.store(0, std::memory_order_relaxed);
  if (slots_.empty()) return;
  reveal(0);
  page_->go.store(1, std::memory_order_release);
  thread_ = std::thread([this] { serve(); });
}

void TurnServer::stop() {
  stopping_ = true;
  worker::wake_all(page_->done);
  if (thread_.joinable()) thread_.join();
}

void TurnServer::reveal(size_t call) {
  const int64_t slot = slots_[call];
  if (slot < 0 || slot >= place_.layout->slots) throw Error(fmt::format("turn {}: slot {} is outside the arena", call, slot));
  const uint64_t at = place_.layout->slot_bytes * static_cast<uint64_t>(slot);
  std::memcpy(place_.arena + at, place_.staging + at, place_.layout->slot_bytes);
}

void TurnServer::record(size_t call) {
  Turn& turn = turns_[call];
  const uint32_t count = std::min<uint32_t>(page_->output_count.load(std::memory_order_relaxed), worker::kMaxTurnOutputs);
  for (uint32_t o = 0; o < count; ++o) turn.outputs.push_back(page_->outputs[o]);
  for (size_t o = 0; o < turn.outputs.size(); ++o) {
    const auto& span = turn.outputs[o];
    if (span.bytes == 0) continue;
    for (int k = 0; k < kSamplesPerOutput; ++k) {
      const uint64_t length = std::min(kSampleBytes, span.bytes);
      const uint64_t room = span.bytes - length;
      const uint64_t draw = mix64(sample_seed_ ^ mix64((call << 20) ^ (o << 8) ^ static_cast<uint64_t>(k)));
      Sample sample{o, span.address + (room == 0 ? 0 : draw % (room + 1)), std::vector<uint8_t>(length)};
      try {
        worker::read_process_memory(place_.worker, sample.address, length, sample.bytes.data());
      } catch (const InputError& e) {
        if (!problem_) problem_ = fmt::format("call {}'s outputs, as published at its turn, could not be read: {}", call, e.what());
        return;
      }
      turn.samples.push_back(std::move(sample));
    }
  }
}

void TurnServer::serve() {
  auto turn_given = std::chrono::steady_clock::now();
  for (size_t call = 0; call < slots_.size(); ++call) {
    // Awake at first (worker/call_turns.h, await_above): asleep, the evaluator's wake-up (20-40 us on
    // two cores, varying) came into every call of both programs.
    if (!worker::await_above(page_->done, static_cast<uint32_t>(call), kTurnWaitSeconds, &stopping_)) return;
    const auto started = std::chrono::steady_clock::now();
    if (call > 0) call_seconds_.push_back(std::chrono::duration<double>(started - turn_given).count());
    record(call);
    if (call + 1 < slots_.size()) {
      try {
        reveal(call + 1);
      } catch (const Error& e) {
        if (!problem_) problem_ = e.what();
        return;
      }
      turn_given = std::chrono::steady_clock::now();
      page_->go.store(static_cast<uint32_t>(call + 2), std::memory_order_release);
      worker::wake_all(page_->go);
    }
    served_seconds_ += seconds_since(started);
    ++turns_served_;
  }
}

std::optional<double> TurnServer::per_call_seconds(int* dropped) const {
  *dropped = 0;
  if (call_seconds_.empty()) return std::nullopt;
  const double limit = 4 * median(call_seconds_);
  double sum = 0;
  int kept = 0;
  for (const double s : call_seconds_) {
    if (s > limit) {
      ++*dropped;
      continue;
    }
    sum += s;
    ++kept;
  }
  return kept > 0 ? sum / kept : 0.0;
}

std::optional<std::string> TurnServer::changed_since_turn(size_t call, const std::vector<worker::TensorRef>& refs) const {
  if (call >= turns_.size()) return fmt::format("call {} had no turn", call);
  const Turn& turn = turns_[call];
  // (the page describes at most kMaxTurnOutputs outputs: those are the ones compared)
  const size_t described = std::min<size_t>(refs.size(), worker::kMaxTurnOutputs);
  if (turn.outputs.size() != described) {
    return fmt::format("call {} published {} outputs at its turn, and its reply names {}", call, turn.outputs.size(), refs.size());
  }
  for (size_t o = 0; o < described; ++o) {
    if (refs[o].address != turn.outputs[o].address || static_cast<uint64_t>(refs[o].meta.nbytes()) != turn.outputs[o].bytes) {
      return fmt::format("output {} of call {} is not the memory the call returned at its turn", o, call);
    }
  }
  for (const Sample& sample : turn.samples) {
    std::vector<uint8_t> now(sample.bytes.size());
    worker::read_process_memory(place_.worker, sample.address, now.size(), now.data());
    if (now != sample.bytes) {
      return fmt::format("output {} of call {} changed after the call returned (bytes sampled at its turn differ at the "
                         "end of the batch): the call answered before its outputs were computed",
                         sample.output, call);
    }
  }
  return std::nullopt;
}

}  // namespace crl::eval
