// libFuzzer harness: .crl program text (section splitting). Any input must parse or throw
// crl::InputError; anything else (a crash, a sanitizer report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "program/program_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const crl::ProgramText program = crl::parse_program_text(text, "fuzz.crl");
    // What render writes must parse back to the same sections.
    const crl::ProgramText again = crl::parse_program_text(crl::render_program_text(program), "fuzz.crl");
    if (again.host.text != program.host.text || again.spec.text != program.spec.text ||
        again.device.text != program.device.text) {
      __builtin_trap();
    }
  } catch (const crl::InputError&) {
  }
  return 0;
}
