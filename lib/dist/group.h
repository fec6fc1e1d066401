// dist::Group: an MPI communicator and the messages crl's ranks exchange over it, as text or as
// typed values (a type with nlohmann::json's to_json/from_json; from_json reads with .at(), so a
// missing or mistyped field is an error, never a default). Every size is bounded by
// kMaxMessageBytes before anything is allocated for it.
//
// Collectives (broadcast, gather, barrier) must be called by every rank of the group in the same
// order. Point-to-point messages carry a tag that names their kind (dispatch.h's tags).
#pragma once

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace crl::dist {

// The largest message accepted (a program, a verdict with its truncated logs, a step's plan).
inline constexpr int64_t kMaxMessageBytes = 64 << 20;

class Group {
 public:
  // A view of `comm`: the caller keeps ownership (MpiRoles frees the communicators it made).
  explicit Group(MPI_Comm comm);
  static Group world() { return Group(MPI_COMM_WORLD); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  // ---- collectives ----
  // `root`'s `text` on every rank.
  void broadcast_text(std::string& text, int root) const;
  // Every rank's `text` at `root`, in rank order; the other ranks get an empty list.
  std::vector<std::string> gather_texts(const std::string& text, int root) const;
  void barrier() const;

  // `root`'s `value` on every rank (root's own copy is read back from the text too, so every rank
  // holds the same bits). `what` names the message in errors.
  template <class T>
  T broadcast(const T& value, int root, std::string_view what) const {
    std::string text = rank_ == root ? nlohmann::json(value).dump() : std::string();
    broadcast_text(text, root);
    return decode<T>(text, what, root);
  }
  // Every rank's `value` at `root`, in rank order; the other ranks get an empty list.
  template <class T>
  std::vector<T> gather(const T& value, int root, std::string_view what) const {
    const std::vector<std::string> texts = gather_texts(nlohmann::json(value).dump(), root);
    std::vector<T> out;
    out.reserve(texts.size());
    for (size_t r = 0; r < texts.size(); ++r) out.push_back(decode<T>(texts[r], what, static_cast<int>(r)));
    return out;
  }

  // ---- point to point ----
  // Sends `text` to `dest` (blocking until MPI has taken it).
  void send_text(int dest, int tag, const std::string& text) const;
  // Receives one message of `tag` from `source` (or MPI_ANY_SOURCE), waiting for it by polling
  // (see group.cpp for why), and sets *from (when given) to its sender.
  std::string receive_text(int source, int tag, int* from) const;
  // The sender of a message of `tag` from `source` that is waiting to be received, without
  // receiving it or waiting.
  std::optional<int> pending(int source, int tag) const;

  template <class T>
  void send(int dest, int tag, const T& message) const {
    send_text(dest, tag, nlohmann::json(message).dump());
  }
  template <class T>
  T receive(int source, int tag, int* from, std::string_view what) const {
    int sender = -1;
    const std::string text = receive_text(source, tag, &sender);
    if (from != nullptr) *from = sender;
    return decode<T>(text, what, sender);
  }

  // A message's text as a T; Error naming the message and its sender when it is not one.
  template <class T>
  static T decode(const std::string& text, std::string_view what, int sender) {
    try {
      return nlohmann::json::parse(text).get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw_unreadable(what, sender, e.what());
    } catch (const InputError& e) {
      throw_unreadable(what, sender, e.what());
    }
  }

 private:
  [[noreturn]] static void throw_unreadable(std::string_view what, int sender, const char* why);
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace crl::dist
