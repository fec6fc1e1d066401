// libFuzzer harness: a JSONL file of candidates or SFT data read as `crl eval X.jsonl`, `crl data
// validate` and the sft stage read it: rl::read_sft_jsonl (each line through the nesting-bounded
// parser, core/json_bounded.h), then each program parsed as a .crl. Malformed lines must be an
// InputError naming the line, never a crash (deep nesting in a field once crashed dump()).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/json_bounded.h"
#include "program/program_text.h"
#include "rl/sft_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("crl_fuzz_jsonl_" + std::to_string(::getpid()) + ".jsonl")).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  try {
    for (const auto& example : crl::rl::read_sft_jsonl(path)) {
      crl::parse_program_text(example.program, path + ":" + std::to_string(example.line));
    }
  } catch (const crl::InputError&) {
  }
  // Each line also through the bounded parser alone, as the generate batch file is read.
  std::string text(reinterpret_cast<const char*>(data), size);
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    try {
      crl::parse_json_bounded(std::string_view(text).substr(start, end - start), "fuzzed.jsonl").dump();
    } catch (const crl::InputError&) {
    }
    start = end + 1;
  }
  return 0;
}
