// Splitting a .crl program into its spec, device and host sections (format: docs/program-format.md).
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

struct ProgramText {
  std::string origin;  // file path or other name, used in every message about this program
  SourceSection spec, device, host;
};

// The marker lines, exactly as a program spells them.
inline constexpr const char* kSpecMarker = "// crl:spec";
inline constexpr const char* kDeviceMarker = "// crl:device";
inline constexpr const char* kHostMarker = "// crl:host";

// Splits `text` at its marker lines (a leading UTF-8 byte-order mark is skipped). Throws InputError "origin:LINE: expected ... (found ...)" for
// an unknown or repeated marker, anything but blank lines and // comments before the first marker,
// and a missing or empty host section.
ProgramText parse_program_text(const std::string& text, const std::string& origin);

// Reads the file at `path` and parses it (IoError when it cannot be read).
ProgramText load_program_file(const std::string& path);

// The program written back as text (markers and sections in spec, device, host order); parsing
// the result gives the same sections, though at other line numbers when sections moved.
std::string render_program_text(const ProgramText& program);

}  // namespace crl
