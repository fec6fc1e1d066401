// why_lines (verdict_why.h).
#include "eval/verdict_why.h"

#include <fmt/format.h>

#include <sstream>

namespace crl::eval {
namespace {

std::vector<std::string> non_blank_lines(const std::string& text, bool skip_sandbox_notes) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    // The worker's sandbox report opens every log: it says what was allowed, not what went wrong.
    if (skip_sandbox_notes && line.rfind("crl-worker: sandbox:", 0) == 0) continue;
    out.push_back(line);
  }
  return out;
}

// The first (compiler) or last (a worker's dying words) `max` lines of a log, with a note of the rest.
void quote_log(std::vector<std::string>& out, const std::string& what, const std::vector<std::string>& lines, size_t max,
               bool from_end) {
  if (lines.empty()) return;
  const size_t shown = std::min(max, lines.size());
  out.push_back(fmt::format("{}{}:", what, lines.size() > shown ? fmt::format(" ({} {} of {})", from_end ? "last" : "first", shown, lines.size()) : ""));
  const size_t first = from_end ? lines.size() - shown : 0;
  for (size_t i = first; i < first + shown; ++i) out.push_back("  " + lines[i]);
  if (lines.size() > shown) out.push_back(fmt::format("  ... {} more line(s): --json has the whole log", lines.size() - shown));
}

}  // namespace

std::vector<std::string> why_lines(const Verdict& v, size_t max_log_lines) {
  std::vector<std::string> out;
  if (v.ok()) return out;
  const CheckStep* failed = v.first_failed_step();
  const bool said = failed != nullptr && !failed->detail.empty() && v.message.find(failed->detail) != std::string::npos;
  if (v.status == VerdictStatus::kHack && failed != nullptr) {
    // The guard is named by the hack's kind; the check it fired in (a trial, the symbol scan) and
    // what it saw say where to look.
    if (!said && !v.message.empty()) out.push_back(v.message);
    out.push_back(fmt::format("the {} guard fired at check '{}', which saw: {}", v.hack_kind, failed->name, failed->detail));
    return out;
  }
  // The message in full: a mismatch's says which output, how many elements and the worst one.
  if (!v.message.empty()) out.push_back(v.message);
  // A compiler's log says more than its check ("failed at the host stage").
  const bool log_follows = v.status == VerdictStatus::kCompileError && !v.compile_log.empty();
  if (failed != nullptr && !failed->detail.empty() && !said && !log_follows) {
    out.push_back(fmt::format("failed check '{}': {}", failed->name, failed->detail));
  }
  switch (v.status) {
    case VerdictStatus::kCompileError:
      quote_log(out, "compiler", non_blank_lines(v.compile_log, false), max_log_lines, false);
      break;
    case VerdictStatus::kCrash:
    case VerdictStatus::kRuntimeError:
    case VerdictStatus::kTimeout:
    case VerdictStatus::kInternalError:
      quote_log(out, "worker log", non_blank_lines(v.worker_log, true), max_log_lines, true);
      break;
    default:
      break;
  }
  return out;
}

}  // namespace crl::eval
