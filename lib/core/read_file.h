// Whole-file reading for every loader (configs, tokenizers, programs, indexes): one error type,
// one message form, and a size bound checked before the contents are read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace crl {

// The bytes of `path`. `what` names the file's role in messages ("tokenizer", "program file").
// Throws IoError "cannot open <what> '<path>': <strerror>" when it cannot be opened or read, and
// InputError when it is not a regular file or is larger than `max_bytes`.
std::string read_file(const std::filesystem::path& path, const std::string& what,
                      uint64_t max_bytes = uint64_t{4} << 30);

// read_file for a file the user named (a job file, or a file a job file names): one that is missing
// or unreadable is bad input, so the same message comes as an InputError (crl's exit 3).
std::string read_input_file(const std::filesystem::path& path, const std::string& what,
                            uint64_t max_bytes = uint64_t{1} << 30);

}  // namespace crl
