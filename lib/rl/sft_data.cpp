// Reading SFT JSONL files (format in sft_data.h).
#include "rl/sft_data.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"
#include "core/json_bounded.h"
#include "rl/completion.h"
#include "rl/prompt.h"

namespace crl::rl {

std::vector<SftExample> read_sft_jsonl(const std::string& path, UnparsedCompletions unparsed) {
  constexpr size_t kMaxLineBytes = 16u << 20;
  constexpr size_t kMaxLines = 10'000'000;
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot read the SFT data file", path));
  std::vector<SftExample> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = fmt::format("{}:{}", path, number);
    if (line.size() > kMaxLineBytes) throw InputError(fmt::format("{}: line longer than {} bytes", where, kMaxLineBytes));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (out.size() >= kMaxLines) throw InputError(fmt::format("{}: more than {} examples", path, kMaxLines));
    // Bounded: the values below are copied and dumped, which recurses once per nesting level.
    const nlohmann::json j = parse_json_bounded(line, where);
    if (!j.is_object()) throw InputError(where + ": not a JSON object");
    if (!j.contains("task") || !j["task"].is_string()) throw InputError(where + ": field 'task' (string) is missing");
    const bool has_completion = j.contains("completion"), has_program = j.contains("program");
    if (has_completion == has_program) throw InputError(where + ": give exactly one of 'completion' and 'program'");
    const auto& text = has_completion ? j["completion"] : j["program"];
    if (!text.is_string()) throw InputError(fmt::format("{}: field '{}' must be a string", where, has_completion ? "completion" : "program"));
    SftExample e;
    e.task = j["task"].get<std::string>();
    e.line = number;
    e.id = j.contains("id") ? (j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump()) : fmt::format("line {}", number);
    if (j.contains("format")) {
      if (!j["format"].is_string()) throw InputError(where + ": field 'format' must be a string ('crl' or 'kernelbench')");
      e.kind = parse_program_kind(j["format"].get<std::string>(), where + ": field 'format'");
    }
    if (has_program) {
      e.program = text.get<std::string>();
      e.completion = completion_from_program(e.program, e.kind);
    } else {
      e.completion = text.get<std::string>();
      const ParsedCompletion parsed = parse_completion(e.completion, where, e.kind);
      if (parsed.ok) {
        e.program = parsed.program_text;
      } else if (unparsed == UnparsedCompletions::kKeep) {
        e.format_problem = fmt::format("{}: {}", where, parsed.problem);
      } else {
        throw InputError(fmt::format("{}: {}", where, parsed.problem));
      }
    }
    if (j.contains("speedup")) {
      if (!j["speedup"].is_number()) throw InputError(where + ": field 'speedup' must be a number");
      e.speedup = j["speedup"].get<double>();
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace crl::rl
