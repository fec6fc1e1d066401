// A candidate's text: a .crl program split into its spec, device and host sections
// (docs/program-format.md), or a KernelBench-format Python module (docs/evaluation.md, "KernelBench-format candidates").
#pragma once

#include <string>

namespace crl {

// One section of a program: its text (the lines after its marker, each ending in '\n') and where
// that text starts in the file, so messages about the section can name the file's own lines.
struct SourceSection {
  bool present = false;
  std::string text;
  int first_line = 0;  // 1-based file line of the section's first text line (the marker's line + 1)
};

// crl: the .crl format; kernelbench: a Python module defining `class ModelNew(nn.Module)`, built
// with the task's init_args and called with its inputs (KernelBench's format).
enum class ProgramKind { crl, kernelbench };

struct ProgramText {
  std::string origin;  // file path or other name, used in every message about this program
  ProgramKind kind = ProgramKind::crl;
  SourceSection spec, device, host;  // crl
  SourceSection python;              // kernelbench: the whole module
};

// "crl" or "kernelbench"; parse_program_kind throws InputError naming `where` for anything else.
const char* program_kind_name(ProgramKind kind);
ProgramKind parse_program_kind(const std::string& name, const std::string& where);

// The marker lines, exactly as a program spells them.
inline constexpr const char* kSpecMarker = "// crl:spec";
inline constexpr const char* kDeviceMarker = "// crl:device";
inline constexpr const char* kHostMarker = "// crl:host";

// Splits `text` at its marker lines (a leading UTF-8 byte-order mark is skipped). Throws InputError "origin:LINE: expected ... (found ...)" for
// an unknown or repeated marker, anything but blank lines and // comments before the first marker,
// and a missing or empty host section.
ProgramText parse_program_text(const std::string& text, const std::string& origin);

// A KernelBench-format module. Nothing of it runs here: the text must only name `class ModelNew`
// at the start of a line (InputError "origin: expected a `class ModelNew(...)` definition" otherwise)
// and hold no NUL byte; whether it imports, builds and computes is the candidate worker's to find.
ProgramText parse_kernelbench_text(const std::string& text, const std::string& origin);

// Reads the file at `path` and parses it (IoError when it cannot be read): a `.py` file as a
// KernelBench-format module, anything else as a .crl program.
ProgramText load_program_file(const std::string& path);

// The program written back as text (markers and sections in spec, device, host order; a KernelBench
// module as it is); parsing the result gives the same sections, though at other line numbers when
// sections moved.
std::string render_program_text(const ProgramText& program);

}  // namespace crl
