// Writing files atomically: readers see the old file or the whole new one, never a part.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace crl {

// Bytes go to a temporary file beside `path`; commit() renames it over `path` (after flushing it
// to disk, when durable). Destroyed without commit(), it removes the temporary file. IoError on
// any failure, naming the file.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // durable: fsync the file before the rename and its folder after it, so that the new content
  // survives a crash of the machine (checkpoints, results); not needed for scratch or cache files.
  void commit(bool durable = true);

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
};

// `text` to `path` through an AtomicFileWriter.
void write_file_atomically(const std::filesystem::path& path, std::string_view text, bool durable = true);

}  // namespace crl
