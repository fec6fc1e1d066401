// Line-by-line splitter of .crl programs at their marker lines; the light check of KernelBench-format modules.
#include "program/program_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/error.h"
#include "core/read_file.h"

namespace crl {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Shortens a line for messages so a huge junk line does not swamp the error.
std::string quoted_excerpt(std::string_view line) {
  constexpr size_t kMax = 60;
  if (line.size() <= kMax) return fmt::format("'{}'", line);
  return fmt::format("'{}...'", line.substr(0, kMax));
}

// Whether a line starts with `class ModelNew` (then not an identifier's character).
bool defines_model_new(std::string_view text) {
  constexpr std::string_view kClass = "class";
  constexpr std::string_view kName = "ModelNew";
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    if (line.substr(0, kClass.size()) == kClass && line.size() > kClass.size() &&
        (line[kClass.size()] == ' ' || line[kClass.size()] == '\t')) {
      line = trim(line.substr(kClass.size()));
      if (line.substr(0, kName.size()) == kName) {
        const char next = line.size() > kName.size() ? line[kName.size()] : '\0';
        if (!(std::isalnum(static_cast<unsigned char>(next)) || next == '_')) return true;
      }
    }
    start = end + 1;
  }
  return false;
}

constexpr const char* kUtf8ByteOrderMark = "\xEF\xBB\xBF";

bool only_whitespace(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

ProgramText parse_program_text(const std::string& text, const std::string& origin) {
  ProgramText program;
  program.origin = origin;
  SourceSection* current = nullptr;
  int line_number = 0;
  // Editors on Windows save UTF-8 with a byte-order mark; it is no part of the program.
  size_t pos = text.starts_with(kUtf8ByteOrderMark) ? std::string_view(kUtf8ByteOrderMark).size() : 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_number;
    // All trailing CRs, not just one: else "x\r\r\n" loses one CR per parse and render round trip.
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view trimmed = trim(line);

    // A "// crl:" line is always meant as a marker, so a misspelt one is an error, not code.
    if (trimmed.starts_with("// crl:") || trimmed.starts_with("//crl:")) {
      SourceSection* section = nullptr;
      if (trimmed == kSpecMarker) section = &program.spec;
      if (trimmed == kDeviceMarker) section = &program.device;
      if (trimmed == kHostMarker) section = &program.host;
      if (section == nullptr) {
        throw InputError(fmt::format(
            "{}:{}: expected a section marker '// crl:spec', '// crl:device' or '// crl:host' (found {})",
            origin, line_number, quoted_excerpt(trimmed)));
      }
      if (section->present) {
        throw InputError(fmt::format(
            "{}:{}: expected each section marker once (found a second '{}'; the first is on line {})",
            origin, line_number, trimmed, section->first_line - 1));
      }
      section->present = true;
      section->first_line = line_number + 1;
      current = section;
      continue;
    }
    if (current == nullptr) {
      if (trimmed.empty() || trimmed.starts_with("//")) continue;
      throw InputError(fmt::format(
          "{}:{}: expected only blank lines and // comments before the first section marker (found {})",
          origin, line_number, quoted_excerpt(trimmed)));
    }
    current->text.append(line);
    current->text.push_back('\n');
  }
  if (!program.host.present) {
    throw InputError(fmt::format("{}:{}: expected a '// crl:host' section (found {} without one)",
                                 origin, line_number + 1,
                                 line_number == 0 ? "an empty program" : "the end of the program"));
  }
  if (only_whitespace(program.host.text)) {
    throw InputError(fmt::format("{}:{}: expected the forward function in the host section (found an "
                                 "empty section)", origin, program.host.first_line));
  }
  return program;
}

const char* program_kind_name(ProgramKind kind) { return kind == ProgramKind::kernelbench ? "kernelbench" : "crl"; }

ProgramKind parse_program_kind(const std::string& name, const std::string& where) {
  if (name == "crl") return ProgramKind::crl;
  if (name == "kernelbench") return ProgramKind::kernelbench;
  throw InputError(fmt::format("{}: expected a program format 'crl' or 'kernelbench' (found {})", where, quoted_excerpt(name)));
}

ProgramText parse_kernelbench_text(const std::string& text, const std::string& origin) {
  if (text.find('\0') != std::string::npos) {
    throw InputError(fmt::format("{}: expected Python source text (found a NUL byte at offset {})", origin, text.find('\0')));
  }
  // A definition at the start of a line (not indented, so not nested in another block); whether
  // it is one, and a subclass of nn.Module, the worker finds out by running it.
  if (!defines_model_new(text)) {
    throw InputError(fmt::format("{}: expected a `class ModelNew(nn.Module)` definition at the start of a line "
                                 "(KernelBench's format; found none)",
                                 origin));
  }
  ProgramText program;
  program.origin = origin;
  program.kind = ProgramKind::kernelbench;
  program.python = {true, text, 1};
  return program;
}

ProgramText load_program_file(const std::string& path) {
  const std::string text = read_file(path, "program file");
  if (std::filesystem::path(path).extension() == ".py") return parse_kernelbench_text(text, path);
  return parse_program_text(text, path);
}

std::string render_program_text(const ProgramText& program) {
  if (program.kind == ProgramKind::kernelbench) return program.python.text;
  std::string out;
  const auto add = [&out](const SourceSection& section, const char* marker) {
    if (!section.present) return;
    out += marker;
    out += '\n';
    out += section.text;
  };
  add(program.spec, kSpecMarker);
  add(program.device, kDeviceMarker);
  add(program.host, kHostMarker);
  return out;
}

}  // namespace crl
