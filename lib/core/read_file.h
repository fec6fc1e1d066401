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

}  // namespace crl
