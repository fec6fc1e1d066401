// ResultsWriter: the one writer of a crl results file (HDF5): append-only tables, /meta
// attributes and text stores, flushed to disk on demand. Layout: docs/results-format.md.
//
// One writer per file, and one thread per writer: a second ResultsWriter on the same path, in
// this or any process on a file system with flock, fails with an IoError (see WriterLock).
// Other threads may use other writers and readers only if HDF5 is a thread-safe build (Debian's
// is; HDF5 then runs one call at a time); with a non-thread-safe HDF5, keep all of it on one
// thread. Readers (ResultsReader, h5py) may open the file while it is written and see it as of the
// writer's last flush().
// Between flushes HDF5 keeps the step's metadata, including its strings, in memory (see
// writer_file_access in the .cpp): flush once per step, not once per job.
// Crash consistency: HDF5 writes only a shadow copy beside the file, and flush() makes the shadow
// the file by an atomic rename (ShadowedFile), so the file holds the state of the last completed
// flush() however the writer dies; reopening it appends after those rows.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "results/hdf5_handle.h"
#include "results/shadowed_file.h"
#include "results/table_schema.h"
#include "results/writer_lock.h"

namespace crl::results {

struct ResultsWriterOptions {
  // Rows per HDF5 chunk of each column: 1024 rows is 8 KiB of an int64 column.
  hsize_t chunk_rows = 1024;
  // flush() also fsyncs the shadow and the folder, so a lost node (not just a killed process)
  // keeps flushed rows.
  bool fsync_on_flush = true;
  // HDF5's metadata cache runs without evictions (see the .cpp), so it would keep every string
  // ever written; flush() closes and reopens the file when the cache holds more than this.
  std::size_t reopen_above_cache_bytes = std::size_t{16} << 20;
  // How flush() swaps the shadow in (ShadowedFile); automatic picks what the file system offers.
  CommitMethod commit = CommitMethod::automatic;
};

class ResultsWriter {
 public:
  // Creates `path` (it appears at the first flush), or opens an existing crl results file to
  // append to it. Never truncates: a path that holds anything else (not HDF5, truncated, another
  // HDF5 file, a crl file whose layout fails validate_layout) gives an InputError naming it and
  // is left untouched.
  explicit ResultsWriter(std::string path, ResultsWriterOptions options = {});
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  ResultsWriter(ResultsWriter&&) noexcept;
  ResultsWriter& operator=(ResultsWriter&&) noexcept;
  // Flushes and closes; a failure there is logged (call close() to see it as an exception).
  ~ResultsWriter();

  // Makes table /<name> available for append: creates it, or checks that the existing table's
  // schema equals `schema` (InputError naming the first column that differs). "meta" and
  // "text" are reserved. Returns the rows it already holds. An existing table whose columns are
  // the start of `schema`, and lacks only columns listed in `older_files_lack` (float64 or string:
  // columns added to the format later), gains them; its rows read NaN or "" there.
  std::int64_t declare_table(const std::string& name, const TableSchema& schema,
                             const TableSchema& older_files_lack = {});
  // Appends the batch's rows to a declared table; its schema must equal the table's.
  void append(const std::string& table, const RowBatch& rows);
  std::int64_t rows(const std::string& table) const;
  // Sets bool `column` of rows [first_row, end_row) of a declared table to `value`: the one
  // exception to append-only, for flags that later events set on earlier rows (a resumed job
  // marks the rows its checkpoint does not cover `superseded`). InputError naming the table and
  // column when the column is not bool or the range is not within the table.
  void set_flag(const std::string& table, const std::string& column, std::int64_t first_row, std::int64_t end_row,
                bool value);

  // Sets attribute `key` of /meta to a UTF-8 string (replacing an earlier value).
  void set_meta(const std::string& key, std::string_view value);
  // Sets attribute `key` of /meta to the JSON text of `value` (job config, host lists, ...).
  void set_meta_json(const std::string& key, const nlohmann::json& value);

  // Stores texts under /text/<store>, keyed by id (a rollout id, say). Ids are unique within a
  // store across reopens; a repeated id is an InputError and nothing of the call is written.
  void put_texts(const std::string& store, const std::vector<std::int64_t>& ids,
                 const std::vector<std::string>& texts);
  void put_text(const std::string& store, std::int64_t id, std::string_view text);

  // Writes everything appended so far to the shadow and commits it (H5Fflush, fsync, rename): a
  // job killed after flush() returns keeps every row appended before it, one killed during it
  // keeps the rows of the flush before. Call it once per step.
  void flush();
  // Flushes and closes the file, then releases the writer lock. Idempotent.
  void close();

  // Bytes in HDF5's metadata cache for this file (what flush() bounds by reopening).
  std::size_t metadata_cache_bytes() const;

  const std::string& path() const { return path_; }

 private:
  struct Table {
    std::string where;  // "table 'x' in 'file'", for messages
    TableSchema schema;
    std::vector<Hdf5Dataset> columns;
    hsize_t rows = 0;
  };
  struct TextStore {
    std::unordered_set<std::int64_t> ids;
  };

  Table& find_table(const std::string& key, const char* what);
  Table& open_or_create_table(hid_t parent, const std::string& name, const std::string& key,
                              const char* kind, const TableSchema& schema, const TableSchema& addable);
  void add_columns_to_written_rows(hid_t group, Table& table, const TableSchema& columns);
  void append_rows(Table& table, const RowBatch& rows);
  TextStore& text_store(const std::string& store);
  void require_open() const;
  void reopen_to_empty_cache();

  std::string path_;
  ResultsWriterOptions options_;
  std::unique_ptr<WriterLock> lock_;
  std::unique_ptr<ShadowedFile> shadow_;  // declared before file_: HDF5 closes before it goes
  Hdf5File file_;
  Hdf5Group meta_;
  Hdf5Group text_;
  std::map<std::string, Table> tables_;  // key: the group's path, "name" or "text/store"
  std::map<std::string, TextStore> text_stores_;
};

}  // namespace crl::results
