// safetensors checkpoints (Hugging Face format): validated mmap reading into CPU at::Tensors,
// single files and sharded checkpoints (model.safetensors.index.json), and atomic writing.
// The format and its validation: safetensors_header.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/safetensors_header.h"

namespace crl::policy {

// The ATen scalar type for a safetensors dtype name, and back.
at::ScalarType safetensors_dtype_to_scalar_type(const std::string& dtype);
std::string scalar_type_to_safetensors_dtype(at::ScalarType type);

// One safetensors file, memory-mapped and validated on open. Tensors returned by tensor() are
// zero-copy CPU views of the mapping (copy-on-write, so writing to them never touches the file)
// and keep the mapping alive after this object is gone. A tensor whose data is not aligned to its
// element size is copied instead.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  // Entries in header order of their data offsets.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  at::Tensor tensor(const std::string& name) const;

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  uint64_t data_start_ = 0;  // file offset of the data buffer: 8 + header length
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint: one safetensors file, or shards listed by model.safetensors.index.json.
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file, an index .json, or a directory holding
  // model.safetensors.index.json or model.safetensors (the index wins when both exist).
  explicit SafetensorsCheckpoint(const std::filesystem::path& path);

  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return shard_of_.count(name) != 0; }
  at::Tensor tensor(const std::string& name) const;
  const SafetensorsEntry& entry(const std::string& name) const;
  // Every tensor, by name (zero-copy views into the mapped shards).
  std::map<std::string, at::Tensor> load_all() const;
  // __metadata__ of the single file, or the union of the shards' (the index's own "metadata"
  // object carries only total_size).
  std::map<std::string, std::string> metadata() const;
  size_t shard_count() const { return shards_.size(); }

 private:
  std::filesystem::path source_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, size_t> shard_of_;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes `tensors` (any device; copied to CPU and made contiguous) as one safetensors file with
// `metadata` as __metadata__. Atomic: written to a temporary name beside `path`, flushed, then
// renamed over it, so readers never see a half-written file. Names must be unique and non-empty.
// Missing parent directories are created.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes a sharded checkpoint into `directory`: model-0000i-of-0000n.safetensors, each at most
// `max_shard_bytes` of tensor data (a larger tensor gets a shard of its own), and
// model.safetensors.index.json ({"metadata": {"total_size": ...}, "weight_map": {...}}), which is
// written last so a reader never sees an index pointing at missing shards.
void write_sharded_safetensors(const std::filesystem::path& directory, const NamedTensors& tensors,
                               uint64_t max_shard_bytes,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace crl::policy
