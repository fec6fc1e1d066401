// ResultsWriter: creates or reopens a results file, appends column batches, flushes per step.
#include "results/results_writer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <mutex>

#include "core/error.h"
#include "results/hdf5_check.h"
#include "results/hdf5_storage.h"
#include "results/results_validate.h"
#include "results/shadow_driver.h"

namespace crl::results {

namespace {

using namespace detail;

const TableSchema kTextSchema = {{"id", ColumnType::int64}, {"text", ColumnType::string}};

void silence_hdf5_once() {
  static std::once_flag once;
  std::call_once(once, [] { hdf5_silence_default_printing(); });
}

// The shadow's driver, and HDF5 keeping dirty metadata in its cache until flush() instead of
// evicting (writing) it at random moments. The file itself only ever changes by a commit; this
// keeps the shadow still between commits too, so that a reader that opened the file before a
// commit, and reads the old file as it becomes the shadow, sees it change only while the commit
// brings it up to date (as readers of a file flushed in place did), not all through the next step.
// The cache grows between flushes; flush() bounds it by reopening (reopen_above_cache_bytes).
Hdf5PropertyList writer_file_access(ShadowedFile& shadow) {
  auto fapl = shadow_file_access(shadow);
  H5AC_cache_config_t config{};
  config.version = H5AC__CURR_CACHE_CONFIG_VERSION;
  CRL_H5_CHECK(H5Pget_mdc_config(fapl.id(), &config));
  config.evictions_enabled = false;
  config.incr_mode = H5C_incr__off;
  config.flash_incr_mode = H5C_flash_incr__off;
  config.decr_mode = H5C_decr__off;
  CRL_H5_CHECK(H5Pset_mdc_config(fapl.id(), &config));
  return fapl;
}

Hdf5Group open_or_create_group(hid_t parent, const char* name) {
  if (has_child(parent, name)) {
    return Hdf5Group(CRL_H5_CHECK(H5Gopen2(parent, name, H5P_DEFAULT)));
  }
  return Hdf5Group(CRL_H5_CHECK(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
}

// Names the first difference between the file's schema and the one a caller declared.
void check_same_schema(const std::string& where, const TableSchema& in_file,
                       const TableSchema& declared) {
  if (in_file == declared) return;
  std::string difference;
  for (std::size_t i = 0; i < std::max(in_file.size(), declared.size()) && difference.empty();
       ++i) {
    if (i >= in_file.size()) {
      difference = fmt::format("column '{}' is not in the file", declared[i].name);
    } else if (i >= declared.size()) {
      difference =
          fmt::format("column '{}' of the file is not in the schema given", in_file[i].name);
    } else if (in_file[i].name != declared[i].name) {
      difference = fmt::format("column {} is '{}' in the file but '{}' in the schema given", i,
                               in_file[i].name, declared[i].name);
    } else if (in_file[i].type != declared[i].type) {
      difference =
          fmt::format("column '{}' is {} in the file but {} in the schema given", in_file[i].name,
                      column_type_name(in_file[i].type), column_type_name(declared[i].type));
    }
  }
  throw InputError(fmt::format("schema mismatch for {}: {} (file: {}; given: {})", where,
                               difference, describe_schema(in_file), describe_schema(declared)));
}

}  // namespace

ResultsWriter::ResultsWriter(std::string path, ResultsWriterOptions options)
    : path_(std::move(path)), options_(options) {
  with_file_named(path_, [&] {
    silence_hdf5_once();
    if (options_.chunk_rows == 0) throw InputError("ResultsWriterOptions.chunk_rows must be > 0");
    lock_ = std::make_unique<WriterLock>(path_);
    struct stat info {};
    if (::lstat(path_.c_str(), &info) != 0 && errno == ENOENT) {
      // HDF5 writes the shadow only; the file appears whole at the first commit, and only if
      // nothing else took its name meanwhile (ShadowedFile never replaces a file it did not write).
      shadow_ = ShadowedFile::create(path_, options_.commit, options_.fsync_on_flush);
      const auto fapl = writer_file_access(*shadow_);
      const hid_t id = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id());
      if (id < 0) {
        throw IoError(
            fmt::format("cannot create results file '{}': {}", path_, hdf5_error_stack()));
      }
      file_ = Hdf5File(id);
      write_string_attribute(file_.id(), kFormatAttribute, kFormatName);
      write_int64_attribute(file_.id(), kFormatVersionAttribute, kFormatVersion);
    } else {
      // Checked as the user's file (InputError naming what is wrong) before anything is copied.
      {
        const auto read_only = file_access_without_hdf5_locking();
        const auto checked = open_existing_results_file(path_, H5F_ACC_RDONLY, read_only.id());
        validate_layout(checked.id(), path_);
      }
      shadow_ = ShadowedFile::open(path_, options_.commit, options_.fsync_on_flush);
      const auto fapl = writer_file_access(*shadow_);
      file_ = Hdf5File(CRL_H5_CHECK(H5Fopen(path_.c_str(), H5F_ACC_RDWR, fapl.id())));
    }
    meta_ = open_or_create_group(file_.id(), kMetaGroup);
    text_ = open_or_create_group(file_.id(), kTextGroup);
    flush();  // a new file is a valid, empty results file from here on
  });
}

ResultsWriter::ResultsWriter(ResultsWriter&&) noexcept = default;
ResultsWriter& ResultsWriter::operator=(ResultsWriter&& other) noexcept {
  if (this != &other) {
    try {
      close();
    } catch (const std::exception& e) {
      spdlog::error("closing results file '{}' failed: {}", path_, e.what());
    }
    path_ = std::move(other.path_);
    options_ = other.options_;
    lock_ = std::move(other.lock_);
    shadow_ = std::move(other.shadow_);
    file_ = std::move(other.file_);
    meta_ = std::move(other.meta_);
    text_ = std::move(other.text_);
    tables_ = std::move(other.tables_);
    text_stores_ = std::move(other.text_stores_);
  }
  return *this;
}

ResultsWriter::~ResultsWriter() {
  try {
    close();
  } catch (const std::exception& e) {
    spdlog::error("closing results file '{}' failed: {}", path_, e.what());
  }
}

void ResultsWriter::require_open() const {
  if (!file_.valid()) throw Error(fmt::format("results file '{}' is closed", path_));
}

namespace {

// The columns a table in the file lacks of the ones declared, when it may gain them: the file's
// columns are the declared ones' start and every column after them is in `addable` (float64 or
// string: the rows already written read NaN or ""). Otherwise the schemas must be equal (check_same_schema).
TableSchema columns_to_add(const std::string& where, const TableSchema& in_file, const TableSchema& declared,
                           const TableSchema& addable) {
  if (in_file.size() < declared.size() && std::equal(in_file.begin(), in_file.end(), declared.begin())) {
    const TableSchema missing(declared.begin() + static_cast<std::ptrdiff_t>(in_file.size()), declared.end());
    const bool all_addable = std::all_of(missing.begin(), missing.end(), [&](const ColumnSpec& c) {
      return std::find(addable.begin(), addable.end(), c) != addable.end();
    });
    if (all_addable) return missing;
  }
  check_same_schema(where, in_file, declared);
  return {};
}

}  // namespace

ResultsWriter::Table& ResultsWriter::open_or_create_table(hid_t parent, const std::string& name,
                                                          const std::string& key, const char* kind,
                                                          const TableSchema& schema, const TableSchema& addable) {
  Table table;
  table.where = fmt::format("{} '{}' in '{}'", kind, key, path_);
  Hdf5Group group;
  if (has_child(parent, name)) {
    const auto not_ours = [&] {
      return InputError(fmt::format("'{}' in '{}' exists but is not a crl {}", key, path_, kind));
    };
    H5O_info_t info{};
    CRL_H5_CHECK(H5Oget_info_by_name(parent, name.c_str(), &info, H5P_DEFAULT));
    if (info.type != H5O_TYPE_GROUP) throw not_ours();
    group = Hdf5Group(CRL_H5_CHECK(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)));
    if (!has_attribute(group.id(), kKindAttribute) ||
        read_string_attribute(group.id(), kKindAttribute, table.where) != kind) {
      throw not_ours();
    }
    table.schema = read_schema(group.id(), table.where);
    const TableSchema missing = columns_to_add(table.where, table.schema, schema, addable);
    for (const auto& column : table.schema) {
      table.columns.emplace_back(
          CRL_H5_CHECK(H5Dopen2(group.id(), column.name.c_str(), H5P_DEFAULT)));
    }
    // Columns grow one after another within an append; unequal lengths mean a write failed
    // part-way (or a crash hit a flush), and appending would misalign the rows.
    table.rows = column_length(table.columns[0].id());
    for (std::size_t i = 1; i < table.columns.size(); ++i) {
      const auto length = column_length(table.columns[i].id());
      if (length != table.rows) {
        throw InputError(fmt::format(
            "{} is inconsistent: column '{}' has {} rows but '{}' has {}; it cannot be appended "
            "to (ResultsReader reads the rows all columns share)",
            table.where, table.schema[0].name, table.rows, table.schema[i].name, length));
      }
    }
    if (!missing.empty()) add_columns_to_written_rows(group.id(), table, missing);
  } else {
    group = Hdf5Group(
        CRL_H5_CHECK(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    write_string_attribute(group.id(), kKindAttribute, kind);
    std::vector<std::string> names;
    for (const auto& column : schema) names.push_back(column.name);
    write_string_list_attribute(group.id(), kColumnsAttribute, names);
    const hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = options_.chunk_rows;
    Hdf5Dataspace space(CRL_H5_CHECK(H5Screate_simple(1, &zero, &unlimited)));
    Hdf5PropertyList dcpl(CRL_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
    CRL_H5_CHECK(H5Pset_chunk(dcpl.id(), 1, &chunk));
    for (const auto& column : schema) {
      Hdf5Datatype file_type;
      switch (column.type) {
        case ColumnType::int64:
          file_type = Hdf5Datatype(CRL_H5_CHECK(H5Tcopy(H5T_STD_I64LE)));
          break;
        case ColumnType::float64:
          file_type = Hdf5Datatype(CRL_H5_CHECK(H5Tcopy(H5T_IEEE_F64LE)));
          break;
        case ColumnType::boolean:
          file_type = bool_type();
          break;
        case ColumnType::string:
          file_type = string_type();
          break;
      }
      table.columns.emplace_back(
          CRL_H5_CHECK(H5Dcreate2(group.id(), column.name.c_str(), file_type.id(), space.id(),
                                  H5P_DEFAULT, dcpl.id(), H5P_DEFAULT)));
    }
    table.schema = schema;
  }
  return tables_.insert_or_assign(key, std::move(table)).first->second;
}

void ResultsWriter::add_columns_to_written_rows(hid_t group, Table& table, const TableSchema& columns) {
  const hsize_t rows = table.rows, unlimited = H5S_UNLIMITED, chunk = options_.chunk_rows;
  Hdf5Dataspace space(CRL_H5_CHECK(H5Screate_simple(1, &rows, &unlimited)));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const char* empty = "";
  for (const auto& column : columns) {
    if (column.type != ColumnType::float64 && column.type != ColumnType::string) {
      throw InputError(fmt::format("{}: column '{}' cannot be added to rows already written: only float64 columns "
                                   "(read NaN there) and string ones (read \"\") can", table.where, column.name));
    }
    Hdf5PropertyList dcpl(CRL_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
    CRL_H5_CHECK(H5Pset_chunk(dcpl.id(), 1, &chunk));
    // Storage for the earlier rows now, holding NaN or "": readers that check a column's rows
    // against the bytes it holds (crl_results.py) see them written.
    CRL_H5_CHECK(H5Pset_alloc_time(dcpl.id(), H5D_ALLOC_TIME_EARLY));
    CRL_H5_CHECK(H5Pset_fill_time(dcpl.id(), H5D_FILL_TIME_ALLOC));
    const Hdf5Datatype file_type = column.type == ColumnType::float64 ? Hdf5Datatype(CRL_H5_CHECK(H5Tcopy(H5T_IEEE_F64LE)))
                                                                      : string_type();
    if (column.type == ColumnType::float64) {
      CRL_H5_CHECK(H5Pset_fill_value(dcpl.id(), H5T_NATIVE_DOUBLE, &nan));
    } else {
      CRL_H5_CHECK(H5Pset_fill_value(dcpl.id(), file_type.id(), static_cast<const void*>(&empty)));
    }
    table.columns.emplace_back(CRL_H5_CHECK(
        H5Dcreate2(group, column.name.c_str(), file_type.id(), space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT)));
    table.schema.push_back(column);
  }
  std::vector<std::string> names;
  for (const auto& column : table.schema) names.push_back(column.name);
  write_string_list_attribute(group, kColumnsAttribute, names);
}

std::int64_t ResultsWriter::declare_table(const std::string& name, const TableSchema& schema,
                                          const TableSchema& older_files_lack) {
  return with_file_named(path_, [&]() -> std::int64_t {
    require_open();
    check_result_name("table", name);
    if (name == kMetaGroup || name == kTextGroup) {
      throw InputError(fmt::format("table name '{}' is reserved in results files", name));
    }
    check_schema(name, schema);
    if (const auto it = tables_.find(name); it != tables_.end()) {
      check_same_schema(it->second.where, it->second.schema, schema);
      return static_cast<std::int64_t>(it->second.rows);
    }
    return static_cast<std::int64_t>(
        open_or_create_table(file_.id(), name, name, "table", schema, older_files_lack).rows);
  });
}

ResultsWriter::Table& ResultsWriter::find_table(const std::string& key, const char* what) {
  require_open();
  const auto it = tables_.find(key);
  if (it == tables_.end()) {
    throw InputError(
        fmt::format("{} '{}' of results file '{}' was not declared", what, key, path_));
  }
  return it->second;
}

std::int64_t ResultsWriter::rows(const std::string& table) const {
  const auto it = tables_.find(table);
  if (it == tables_.end()) {
    throw InputError(fmt::format("table '{}' of results file '{}' was not declared", table, path_));
  }
  return static_cast<std::int64_t>(it->second.rows);
}

void ResultsWriter::set_flag(const std::string& table_name, const std::string& column, std::int64_t first_row,
                             std::int64_t end_row, bool value) {
  return with_file_named(path_, [&]() -> void {
    auto& table = find_table(table_name, "table");
    std::size_t index = table.schema.size();
    for (std::size_t i = 0; i < table.schema.size(); ++i) {
      if (table.schema[i].name == column) index = i;
    }
    if (index == table.schema.size() || table.schema[index].type != ColumnType::boolean) {
      throw InputError(fmt::format("{} has no bool column '{}'", table.where, column));
    }
    if (first_row < 0 || end_row < first_row || end_row > static_cast<std::int64_t>(table.rows)) {
      throw InputError(fmt::format("rows [{}, {}) are not within the {} rows of {}", first_row, end_row, table.rows,
                                   table.where));
    }
    if (first_row == end_row) return;
    const hsize_t start = static_cast<hsize_t>(first_row), count = static_cast<hsize_t>(end_row - first_row);
    const hid_t dataset = table.columns[index].id();
    Hdf5Dataspace memory_space(CRL_H5_CHECK(H5Screate_simple(1, &count, nullptr)));
    Hdf5Dataspace file_space(CRL_H5_CHECK(H5Dget_space(dataset)));
    CRL_H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
    const std::vector<std::int8_t> bytes(count, value ? 1 : 0);
    CRL_H5_CHECK(H5Dwrite(dataset, memory_type(ColumnType::boolean).id(), memory_space.id(), file_space.id(), H5P_DEFAULT,
                          bytes.data()));
  });
}

void ResultsWriter::append(const std::string& table_name, const RowBatch& rows) {
  return with_file_named(path_, [&]() -> void {
    auto& table = find_table(table_name, "table");
    if (rows.schema() != table.schema) {
      throw InputError(fmt::format("rows for {} have columns ({}) but the table has ({})",
                                   table.where, describe_schema(rows.schema()),
                                   describe_schema(table.schema)));
    }
    append_rows(table, rows);
  });
}

void ResultsWriter::append_rows(Table& table, const RowBatch& rows) {
  if (rows.rows() == 0) return;
  const hsize_t start = table.rows, count = rows.rows(), new_length = table.rows + count;
  Hdf5Dataspace memory_space(CRL_H5_CHECK(H5Screate_simple(1, &count, nullptr)));
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    const hid_t dataset = table.columns[i].id();
    CRL_H5_CHECK(H5Dset_extent(dataset, &new_length));
    Hdf5Dataspace file_space(CRL_H5_CHECK(H5Dget_space(dataset)));
    CRL_H5_CHECK(
        H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
    const auto memtype = memory_type(table.schema[i].type);
    const auto write = [&](const void* data) {
      CRL_H5_CHECK(
          H5Dwrite(dataset, memtype.id(), memory_space.id(), file_space.id(), H5P_DEFAULT, data));
    };
    std::visit(
        [&](const auto& values) {
          using Element = typename std::decay_t<decltype(values)>::value_type;
          if constexpr (std::is_same_v<Element, bool>) {
            const std::vector<std::int8_t> bytes(values.begin(), values.end());
            write(bytes.data());
          } else if constexpr (std::is_same_v<Element, std::string>) {
            // Only strings that need cleaning are copied; the rest are written in place.
            std::vector<std::string> cleaned;  // reserved: its c_str()s must not move
            cleaned.reserve(values.size());
            std::vector<const char*> pointers;
            pointers.reserve(values.size());
            for (const auto& v : values) {
              if (find_invalid_utf8(v) == std::string_view::npos) {
                pointers.push_back(v.c_str());
              } else {
                pointers.push_back(cleaned.emplace_back(to_valid_utf8(v)).c_str());
              }
            }
            write(pointers.data());
          } else {
            write(values.data());
          }
        },
        rows.column(i));
  }
  table.rows = new_length;
}

void ResultsWriter::set_meta(const std::string& key, std::string_view value) {
  return with_file_named(path_, [&]() -> void {
    require_open();
    check_result_name("meta key", key);
    write_string_attribute(meta_.id(), key, std::string(value));
  });
}

void ResultsWriter::set_meta_json(const std::string& key, const nlohmann::json& value) {
  // Invalid UTF-8 inside the JSON is replaced, not thrown on: metadata must never stop a job.
  set_meta(key, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

ResultsWriter::TextStore& ResultsWriter::text_store(const std::string& store) {
  require_open();
  check_result_name("text store", store);
  const std::string key = fmt::format("{}/{}", kTextGroup, store);
  if (const auto it = text_stores_.find(key); it != text_stores_.end()) return it->second;
  auto& table = open_or_create_table(text_.id(), store, key, "text", kTextSchema, {});
  TextStore loaded;
  const auto ids = std::get<std::vector<std::int64_t>>(
      read_column_values(table.columns[0].id(), ColumnType::int64, table.rows, table.where));
  loaded.ids.insert(ids.begin(), ids.end());
  return text_stores_.emplace(key, std::move(loaded)).first->second;
}

void ResultsWriter::put_texts(const std::string& store, const std::vector<std::int64_t>& ids,
                              const std::vector<std::string>& texts) {
  return with_file_named(path_, [&]() -> void {
    auto& known = text_store(store);
    auto& table = find_table(fmt::format("{}/{}", kTextGroup, store), "text store");
    if (ids.size() != texts.size()) {
      throw InputError(
          fmt::format("{}: {} ids but {} texts", table.where, ids.size(), texts.size()));
    }
    std::unordered_set<std::int64_t> fresh;
    RowBatch batch(kTextSchema);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (known.ids.contains(ids[i])) {
        throw InputError(fmt::format("{} already holds a text with id {}", table.where, ids[i]));
      }
      if (!fresh.insert(ids[i]).second) {
        throw InputError(
            fmt::format("id {} appears twice in one put_texts call for {}", ids[i], table.where));
      }
      batch.add_row({ids[i], texts[i]});
    }
    append_rows(table, batch);
    known.ids.insert(fresh.begin(), fresh.end());
  });
}

void ResultsWriter::put_text(const std::string& store, std::int64_t id, std::string_view text) {
  put_texts(store, {id}, {std::string(text)});
}

void ResultsWriter::flush() {
  return with_file_named(path_, [&]() -> void {
    require_open();
    // Everything HDF5 holds goes to the shadow, which then becomes the file in one rename.
    CRL_H5_CHECK(H5Fflush(file_.id(), H5F_SCOPE_GLOBAL));
    shadow_->commit();
    if (metadata_cache_bytes() > options_.reopen_above_cache_bytes) reopen_to_empty_cache();
  });
}

// Just after a commit everything in the cache is clean, so closing writes nothing new and the
// reopened file (the same shadow) starts with an empty cache. The writer lock stays held.
void ResultsWriter::reopen_to_empty_cache() {
  for (auto& [key, table] : tables_) table.columns.clear();
  meta_.reset();
  text_.reset();
  CRL_H5_CHECK(H5Fclose(file_.release()));
  const auto fapl = writer_file_access(*shadow_);
  file_ = Hdf5File(CRL_H5_CHECK(H5Fopen(path_.c_str(), H5F_ACC_RDWR, fapl.id())));
  meta_ = Hdf5Group(CRL_H5_CHECK(H5Gopen2(file_.id(), kMetaGroup, H5P_DEFAULT)));
  text_ = Hdf5Group(CRL_H5_CHECK(H5Gopen2(file_.id(), kTextGroup, H5P_DEFAULT)));
  for (auto& [key, table] : tables_) {
    for (const auto& column : table.schema) {
      const std::string dataset_path = fmt::format("{}/{}", key, column.name);
      table.columns.emplace_back(CRL_H5_CHECK(H5Dopen2(file_.id(), dataset_path.c_str(), H5P_DEFAULT)));
      if (column_length(table.columns.back().id()) != table.rows) {
        throw Error(fmt::format("{} changed length while the writer reopened it", table.where));
      }
    }
  }
}

std::size_t ResultsWriter::metadata_cache_bytes() const {
  require_open();
  std::size_t max_size = 0, min_clean_size = 0, current_size = 0;
  int entries = 0;
  CRL_H5_CHECK(H5Fget_mdc_size(file_.id(), &max_size, &min_clean_size, &current_size, &entries));
  return current_size;
}

void ResultsWriter::close() {
  return with_file_named(path_, [&]() -> void {
    if (!file_.valid()) return;
    // Every object of the file is closed before the file itself, so H5Fclose really closes it
    // (ShadowedFile::finish checks that it did) and writes its last bytes to the shadow.
    tables_.clear();
    text_stores_.clear();
    meta_.reset();
    text_.reset();
    CRL_H5_CHECK(H5Fclose(file_.release()));
    shadow_->finish();
    shadow_.reset();
    lock_.reset();
  });
}

}  // namespace crl::results
