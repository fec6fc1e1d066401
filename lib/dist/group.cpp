// dist::Group's MPI calls (group.h).
#include "dist/group.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "dist/mpi_check.h"

namespace crl::dist {

Group::Group(MPI_Comm comm) : comm_(comm) {
  CRL_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  CRL_MPI_CHECK(MPI_Comm_size(comm, &size_));
}

void Group::throw_unreadable(std::string_view what, int sender, const char* why) {
  throw Error(fmt::format("{} from rank {} is unreadable: {}", what, sender, why));
}

void Group::broadcast_text(std::string& text, int root) const {
  int64_t size = static_cast<int64_t>(text.size());
  CRL_MPI_CHECK(MPI_Bcast(&size, 1, MPI_INT64_T, root, comm_));
  if (size < 0 || size > kMaxMessageBytes) throw Error(fmt::format("broadcast of {} bytes refused", size));
  text.resize(static_cast<size_t>(size));
  CRL_MPI_CHECK(MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, root, comm_));
}

std::vector<std::string> Group::gather_texts(const std::string& text, int root) const {
  if (static_cast<int64_t>(text.size()) > kMaxMessageBytes) throw Error("gathered text too long");
  int mine = static_cast<int>(text.size());
  std::vector<int> sizes(static_cast<size_t>(size_));
  CRL_MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, comm_));
  std::vector<int> offsets(static_cast<size_t>(size_), 0);
  int64_t total = 0;
  if (rank_ == root) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      offsets[i] = static_cast<int>(total);
      total += sizes[i];
    }
    if (total > kMaxMessageBytes) throw Error(fmt::format("gather of {} bytes refused", total));
  }
  std::string all(static_cast<size_t>(total), '\0');
  CRL_MPI_CHECK(MPI_Gatherv(text.data(), mine, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, root, comm_));
  std::vector<std::string> out;
  if (rank_ != root) return out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back(all.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(sizes[i])));
  }
  return out;
}

void Group::barrier() const { CRL_MPI_CHECK(MPI_Barrier(comm_)); }

void Group::send_text(int dest, int tag, const std::string& text) const {
  if (static_cast<int64_t>(text.size()) > kMaxMessageBytes) {
    throw Error(fmt::format("message to rank {} is {} bytes, over the {} byte limit", dest, text.size(), kMaxMessageBytes));
  }
  CRL_MPI_CHECK(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, comm_));
}

std::optional<int> Group::pending(int source, int tag) const {
  int waiting = 0;
  MPI_Status status;
  CRL_MPI_CHECK(MPI_Iprobe(source, tag, comm_, &waiting, &status));
  if (!waiting) return std::nullopt;
  return status.MPI_SOURCE;
}

std::string Group::receive_text(int source, int tag, int* from) const {
  // Polled with a growing sleep (50 us to 2 ms), not MPI_Probe: Open MPI's blocking probe spins a
  // core for as long as it waits (a quarter of a CPU on the trainer rank, taken from the evaluator's
  // workers on a 2-core machine), and a message here answers seconds of work, so 2 ms is nothing.
  MPI_Status status;
  for (auto pause = std::chrono::microseconds(50);; pause = std::min(pause * 2, std::chrono::microseconds(2000))) {
    int waiting = 0;
    CRL_MPI_CHECK(MPI_Iprobe(source, tag, comm_, &waiting, &status));
    if (waiting) break;
    std::this_thread::sleep_for(pause);
  }
  int count = 0;
  CRL_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &count));
  if (count < 0 || count > kMaxMessageBytes) {
    throw Error(fmt::format("message from rank {} claims {} bytes (limit {})", status.MPI_SOURCE, count, kMaxMessageBytes));
  }
  std::string text(static_cast<size_t>(count), '\0');
  CRL_MPI_CHECK(MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE));
  if (from != nullptr) *from = status.MPI_SOURCE;
  return text;
}

}  // namespace crl::dist
