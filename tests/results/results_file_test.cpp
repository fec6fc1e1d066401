// Tests ResultsWriter and ResultsReader together: round trips, reopening, schema checks, bad
// files left untouched, the one-writer lock, /meta and text stores.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "core/error.h"
#include "results/hdf5_check.h"
#include "results/hdf5_storage.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "results_test_util.h"

namespace crl::results {
namespace {

using testing::read_bytes;
using testing::ScratchDir;
using testing::write_bytes;

const TableSchema kSchema = {{"step", ColumnType::int64},
                             {"reward", ColumnType::float64},
                             {"correct", ColumnType::boolean},
                             {"task", ColumnType::string}};

template <typename T>
std::vector<T> column_of(const ResultsReader& reader, const std::string& table,
                         const std::string& column) {
  return std::get<std::vector<T>>(reader.column(table, column));
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error thrown)";
}

TEST(ResultsFile, RoundTripsEveryColumnType) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const std::vector<std::int64_t> ints = {0, -1, std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::int64_t>::max(), 42};
  const std::vector<double> doubles = {0.0, -0.0, 1e-310, std::numeric_limits<double>::infinity(),
                                       3.141592653589793};
  const std::vector<bool> bools = {true, false, false, true, true};
  const std::vector<std::string> strings = {"", "gemm_fp16", std::string(100000, 'x'),
                                            "tab\tnew\nline", "Ünïcødé 中文 🚀"};
  {
    // Three rows per chunk, appended 2 + 3 rows: the data crosses chunk boundaries.
    ResultsWriter writer(path, {.chunk_rows = 3});
    EXPECT_EQ(writer.declare_table("steps", kSchema), 0);
    for (std::size_t begin : {0u, 2u}) {
      RowBatch batch(kSchema);
      for (std::size_t i = begin; i < (begin == 0 ? 2u : 5u); ++i) {
        batch.add_row({ints[i], doubles[i], static_cast<bool>(bools[i]), strings[i]});
      }
      writer.append("steps", batch);
    }
    EXPECT_EQ(writer.rows("steps"), 5);
  }
  const ResultsReader reader(path);
  EXPECT_EQ(reader.tables(), (std::vector<std::string>{"steps"}));
  EXPECT_EQ(reader.schema("steps"), kSchema);
  EXPECT_EQ(reader.rows("steps"), 5);
  EXPECT_EQ(column_of<std::int64_t>(reader, "steps", "step"), ints);
  const auto read_doubles = column_of<double>(reader, "steps", "reward");
  ASSERT_EQ(read_doubles.size(), doubles.size());
  for (std::size_t i = 0; i < doubles.size(); ++i) {
    EXPECT_EQ(std::memcmp(&read_doubles[i], &doubles[i], sizeof(double)), 0) << "row " << i;
  }
  EXPECT_EQ(column_of<bool>(reader, "steps", "correct"), bools);
  EXPECT_EQ(column_of<std::string>(reader, "steps", "task"), strings);
  EXPECT_THROW(reader.column("steps", "nope"), InputError);
  EXPECT_THROW(reader.rows("nope"), InputError);
}

TEST(ResultsFile, ADeclaredTableWithoutRowsReadsAsEmpty) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  { ResultsWriter(path).declare_table("tasks", kSchema); }
  const ResultsReader reader(path);
  EXPECT_EQ(reader.schema("tasks"), kSchema);
  EXPECT_EQ(reader.rows("tasks"), 0);
  EXPECT_TRUE(column_of<std::string>(reader, "tasks", "task").empty());
  EXPECT_TRUE(column_of<bool>(reader, "tasks", "correct").empty());
  EXPECT_TRUE(reader.meta_keys().empty());
  EXPECT_TRUE(reader.text_stores().empty());
}

TEST(ResultsFile, AMovedWriterKeepsWriting) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  ResultsWriter first(path);
  first.declare_table("steps", kSchema);
  ResultsWriter second = std::move(first);
  RowBatch batch(kSchema);
  batch.add_row({std::int64_t{1}, 1.0, true, "moved"});
  second.append("steps", batch);
  second.close();
  second.close();  // idempotent
  EXPECT_THROW(second.append("steps", batch), Error);
  EXPECT_EQ(column_of<std::string>(ResultsReader(path), "steps", "task"),
            (std::vector<std::string>{"moved"}));
}

TEST(ResultsFile, NanSurvivesTheRoundTrip) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("t", {{"x", ColumnType::float64}});
    RowBatch batch({{"x", ColumnType::float64}});
    batch.add_row({std::numeric_limits<double>::quiet_NaN()});
    writer.append("t", batch);
  }
  EXPECT_TRUE(std::isnan(column_of<double>(ResultsReader(path), "t", "x").at(0)));
}

TEST(ResultsFile, InvalidUtf8IsStoredAsReplacementCharacters) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("logs", {{"log", ColumnType::string}});
    RowBatch batch({{"log", ColumnType::string}});
    batch.add_row(
        {std::string("seg\xFF"
                     "fault\0tail",
                     14)});
    writer.append("logs", batch);
  }
  EXPECT_EQ(column_of<std::string>(ResultsReader(path), "logs", "log").at(0),
            "seg\xEF\xBF\xBD"
            "fault\xEF\xBF\xBDtail");
}

TEST(ResultsFile, AppendsAcrossReopen) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const auto append_steps = [&](ResultsWriter& writer, std::int64_t first, std::int64_t count) {
    RowBatch batch(kSchema);
    for (std::int64_t s = first; s < first + count; ++s) {
      batch.add_row({s, 0.5 * static_cast<double>(s), s % 2 == 0, fmt::format("task{}", s)});
    }
    writer.append("steps", batch);
    writer.flush();
  };
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    writer.set_meta("git_commit", "abc123");
    append_steps(writer, 0, 2);
  }
  {
    ResultsWriter writer(path);
    EXPECT_EQ(writer.declare_table("steps", kSchema), 2);
    append_steps(writer, 2, 3);
    EXPECT_EQ(writer.rows("steps"), 5);
  }
  const ResultsReader reader(path);
  EXPECT_EQ(column_of<std::int64_t>(reader, "steps", "step"),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(column_of<std::string>(reader, "steps", "task").back(), "task4");
  EXPECT_EQ(column_of<bool>(reader, "steps", "correct"),
            (std::vector<bool>{true, false, true, false, true}));
  EXPECT_EQ(reader.meta("git_commit"), "abc123");
}

TEST(ResultsFile, SchemaMismatchOnReopenNamesTheColumn) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    batch.add_row({std::int64_t{7}, 1.0, true, "a"});
    writer.append("steps", batch);
  }
  ResultsWriter writer(path);
  auto retyped = kSchema;
  retyped[1].type = ColumnType::int64;
  const auto msg = message_of([&] { writer.declare_table("steps", retyped); });
  EXPECT_NE(msg.find("'reward'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float64 in the file but int64"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;

  auto renamed = kSchema;
  renamed[3].name = "task_name";
  const auto rename_msg = message_of([&] { writer.declare_table("steps", renamed); });
  EXPECT_NE(rename_msg.find("'task' in the file but 'task_name'"), std::string::npos) << rename_msg;

  auto longer = kSchema;
  longer.push_back({"extra", ColumnType::string});
  const auto extra_msg = message_of([&] { writer.declare_table("steps", longer); });
  EXPECT_NE(extra_msg.find("'extra' is not in the file"), std::string::npos) << extra_msg;

  EXPECT_THROW(writer.declare_table("steps", retyped), InputError);
  // The file still holds its row, and the right schema still appends.
  EXPECT_EQ(writer.declare_table("steps", kSchema), 1);
}

// A table of an older file that lacks columns added to the format later gains them on reopen
// (only those declared as such, float64 or string), its earlier rows reading NaN or ""; new rows
// append to all.
TEST(ResultsFile, ReopenAddsColumnsOlderFilesLackAsNaNOrEmpty) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    batch.add_row({std::int64_t{7}, 1.0, true, "a"});
    writer.append("steps", batch);
  }
  const TableSchema added = {{"entropy", ColumnType::float64}, {"kl", ColumnType::float64}, {"kind", ColumnType::string}};
  TableSchema newer = kSchema;
  newer.insert(newer.end(), added.begin(), added.end());
  {
    ResultsWriter writer(path);
    auto with_more = newer;
    with_more.push_back({"note", ColumnType::string});
    const auto msg = message_of([&] { writer.declare_table("steps", with_more, added); });
    EXPECT_NE(msg.find("'entropy' is not in the file"), std::string::npos) << "only the columns named may be added: " << msg;
    EXPECT_NE(message_of([&] { writer.declare_table("steps", newer); }).find("'entropy' is not in the file"), std::string::npos)
        << "without older_files_lack the schemas must be equal";
    auto with_int = kSchema;
    with_int.push_back({"count", ColumnType::int64});
    const auto int_msg = message_of([&] { writer.declare_table("steps", with_int, {{"count", ColumnType::int64}}); });
    EXPECT_NE(int_msg.find("only float64 columns"), std::string::npos) << "an int64 has no value that says 'not written': " << int_msg;
  }
  {
    ResultsWriter writer(path);
    EXPECT_EQ(writer.declare_table("steps", newer, added), 1);
    RowBatch batch(newer);
    batch.add_row({std::int64_t{8}, 2.0, false, "b", 1.5, 0.25, "new"});
    writer.append("steps", batch);
  }
  const ResultsReader reader(path);
  EXPECT_EQ(reader.schema("steps"), newer);
  const auto entropy = reader.column_as<double>("steps", "entropy");
  ASSERT_EQ(entropy.size(), 2u);
  EXPECT_TRUE(std::isnan(entropy[0])) << "the row written before the column existed";
  EXPECT_EQ(entropy[1], 1.5);
  EXPECT_EQ(reader.column_as<double>("steps", "kl")[1], 0.25);
  EXPECT_EQ(reader.column_as<std::string>("steps", "kind"), (std::vector<std::string>{"", "new"}))
      << "a string column added later reads \"\" in the rows written before it";
  EXPECT_EQ(reader.column_as<std::int64_t>("steps", "step"), (std::vector<std::int64_t>{7, 8}));
  ResultsWriter again(path);
  EXPECT_EQ(again.declare_table("steps", newer, added), 2) << "a file that has them reopens as it is";
}

// The writer commits whole flushes, so columns of unequal length are damage: refused by the
// reader and the writer alike, naming the table and the columns.
TEST(ResultsFile, ColumnsOfUnequalLengthAreRefusedAsDamage) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    batch.add_row({std::int64_t{1}, 1.0, true, "a"});
    batch.add_row({std::int64_t{2}, 2.0, false, "b"});
    writer.append("steps", batch);
  }
  {
    // As if a write had failed after growing one column.
    const hid_t file = CRL_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    const hid_t reward = CRL_H5_CHECK(H5Dopen2(file, "steps/reward", H5P_DEFAULT));
    const hsize_t three = 3;
    CRL_H5_CHECK(H5Dset_extent(reward, &three));
    CRL_H5_CHECK(H5Dclose(reward));
    CRL_H5_CHECK(H5Fclose(file));
  }
  for (const auto& msg : {message_of([&] { ResultsReader reader(path); }), message_of([&] { ResultsWriter writer(path); })}) {
    EXPECT_NE(msg.find("table 'steps' in '" + path + "' is damaged: column 'step' has 2 rows but 'reward' has 3"),
              std::string::npos)
        << msg;
  }
}

TEST(ResultsFile, AppendChecksTableAndBatchSchema) {
  ScratchDir dir;
  ResultsWriter writer(dir.file("run.h5"));
  writer.declare_table("steps", kSchema);
  RowBatch other({{"step", ColumnType::int64}});
  other.add_row({std::int64_t{1}});
  EXPECT_THROW(writer.append("steps", other), InputError);
  EXPECT_THROW(writer.append("undeclared", other), InputError);
  EXPECT_THROW(writer.declare_table("meta", kSchema), InputError);
  EXPECT_THROW(writer.declare_table("text", kSchema), InputError);
  EXPECT_THROW(writer.declare_table("bad/name", kSchema), InputError);
  EXPECT_EQ(writer.rows("steps"), 0);
}

TEST(ResultsFile, NonHdf5FileIsRefusedByNameAndLeftUntouched) {
  ScratchDir dir;
  const auto path = dir.file("notes.h5");
  const std::string contents = "these are someone's notes, not HDF5\n";
  write_bytes(path, contents);
  const auto msg = message_of([&] { ResultsWriter writer(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;
  EXPECT_THROW(ResultsReader reader(path), InputError);
  EXPECT_EQ(read_bytes(path), contents);

  const auto empty = dir.file("empty.h5");
  write_bytes(empty, "");
  const auto empty_msg = message_of([&] { ResultsWriter writer(empty); });
  EXPECT_NE(empty_msg.find("empty"), std::string::npos) << empty_msg;
  EXPECT_EQ(read_bytes(empty), "");
}

TEST(ResultsFile, TruncatedFileIsRefusedByNameAndLeftUntouched) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    for (std::int64_t i = 0; i < 1000; ++i) batch.add_row({i, 1.0, true, std::string(50, 'p')});
    writer.append("steps", batch);
  }
  const auto whole = read_bytes(path);
  const auto cut = whole.substr(0, whole.size() / 2);
  write_bytes(path, cut);
  for (const auto& attempt : std::vector<std::function<void()>>{
           [&] { ResultsWriter writer(path); }, [&] { ResultsReader reader(path); }}) {
    const auto msg = message_of(attempt);
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated or damaged"), std::string::npos) << msg;
  }
  EXPECT_EQ(read_bytes(path), cut);
}

TEST(ResultsFile, ForeignHdf5FileIsRefused) {
  ScratchDir dir;
  const auto path = dir.file("other.h5");
  hdf5_silence_default_printing();
  CRL_H5_CHECK(
      H5Fclose(CRL_H5_CHECK(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT))));
  const auto before = read_bytes(path);
  const auto msg = message_of([&] { ResultsWriter writer(path); });
  EXPECT_NE(msg.find("not a crl results file"), std::string::npos) << msg;
  EXPECT_EQ(read_bytes(path), before);
}

TEST(ResultsFile, SecondWriterIsRefusedUntilTheFirstCloses) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  auto first = std::make_unique<ResultsWriter>(path);
  try {
    ResultsWriter second(path);
    FAIL() << "a second writer was let in";
  } catch (const InputError& e) {  // two jobs given one results path: the user's to fix (exit 3)
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;
    // The kernel's word on who holds it (/proc/locks), beside the holder's own note.
    EXPECT_NE(msg.find("process " + std::to_string(::getpid()) + " ("), std::string::npos) << msg;
  }
  first.reset();
  EXPECT_NO_THROW(ResultsWriter again(path));
}

TEST(ResultsFile, ReaderSeesFlushedRowsWhileTheWriterIsOpen) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  ResultsWriter writer(path);
  writer.declare_table("steps", kSchema);
  RowBatch batch(kSchema);
  batch.add_row({std::int64_t{1}, 2.0, false, "live"});
  writer.append("steps", batch);
  writer.flush();
  const ResultsReader reader(path);
  EXPECT_EQ(column_of<std::string>(reader, "steps", "task"), (std::vector<std::string>{"live"}));
}

// Without evictions HDF5's metadata cache would keep every string written; flush() reopens the
// file when the cache passes its bound, and the writer carries on where it was.
TEST(ResultsFile, FlushBoundsTheMetadataCacheByReopening) {
  ScratchDir dir;
  const auto write_steps = [&](const std::string& path, std::size_t bound) {
    ResultsWriter writer(path, {.fsync_on_flush = false, .reopen_above_cache_bytes = bound});
    writer.declare_table("steps", kSchema);
    writer.set_meta("git_commit", "abc");
    std::size_t largest_cache = 0;
    for (std::int64_t step = 0; step < 4; ++step) {
      RowBatch batch(kSchema);
      std::vector<std::int64_t> ids;
      std::vector<std::string> programs;
      for (std::int64_t i = 0; i < 256; ++i) {
        batch.add_row({step, 1.0, true, "task"});
        ids.push_back(step * 256 + i);
        programs.push_back(std::string(2048, static_cast<char>('a' + step)));
      }
      writer.append("steps", batch);
      writer.put_texts("programs", ids, programs);
      writer.flush();
      largest_cache = std::max(largest_cache, writer.metadata_cache_bytes());
    }
    // Still checks ids against texts written before the reopens.
    EXPECT_THROW(writer.put_text("programs", 3, "again"), InputError);
    return largest_cache;
  };
  const auto unbounded = write_steps(dir.file("unbounded.h5"), std::size_t{1} << 40);
  const auto bounded = write_steps(dir.file("bounded.h5"), 0);
  EXPECT_GT(unbounded, std::size_t{2} << 20) << "4 steps of 512 KiB of text stay cached";
  EXPECT_LT(bounded, std::size_t{256} << 10);
  const ResultsReader reader(dir.file("bounded.h5"));
  EXPECT_EQ(reader.rows("steps"), 4 * 256);
  EXPECT_EQ(reader.text("programs", 0), std::string(2048, 'a'));
  EXPECT_EQ(reader.text("programs", 4 * 256 - 1), std::string(2048, 'd'));
  EXPECT_EQ(reader.meta("git_commit"), "abc");
}

TEST(ResultsFile, MetaHoldsStringsAndJson) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const nlohmann::json config = {
      {"stage", "rl"}, {"group_size", 16}, {"lr", 1e-6}, {"hosts", {"node01", "node02"}}};
  {
    ResultsWriter writer(path);
    writer.set_meta("git_commit", "0123abcd");
    writer.set_meta("gpu_names", "NVIDIA H200 ×8");
    writer.set_meta("hosts", "node01");
    writer.set_meta("hosts", "node01,node02");  // replaces
    writer.set_meta_json("job_config", config);
    EXPECT_THROW(writer.set_meta("bad key", "x"), InputError);
  }
  const ResultsReader reader(path);
  EXPECT_EQ(reader.meta_keys(),
            (std::vector<std::string>{"git_commit", "gpu_names", "hosts", "job_config"}));
  EXPECT_EQ(reader.meta("gpu_names"), "NVIDIA H200 ×8");
  EXPECT_EQ(reader.meta("hosts"), "node01,node02");
  EXPECT_EQ(reader.meta_json("job_config"), config);
  const auto msg = message_of([&] { reader.meta_json("git_commit"); });
  EXPECT_NE(msg.find("'git_commit'"), std::string::npos) << msg;
  EXPECT_THROW(reader.meta("absent"), InputError);
}

TEST(ResultsFile, TextStoreKeysTextsById) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  const std::string program = "__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }  // ×2 ✓";
  {
    ResultsWriter writer(path);
    writer.put_texts("completions", {10, 11, 12}, {"first", program, ""});
    writer.put_text("logs", 10, "nvcc: ok");
    // A repeated id (within the call or against the store) writes nothing of the call.
    EXPECT_THROW(writer.put_texts("completions", {13, 13}, {"a", "b"}), InputError);
    EXPECT_THROW(writer.put_texts("completions", {14, 10}, {"a", "b"}), InputError);
    EXPECT_THROW(writer.put_texts("completions", {15}, {"a", "b"}), InputError);
    EXPECT_THROW(writer.put_text("bad store", 1, "x"), InputError);
  }
  {
    ResultsWriter writer(path);
    EXPECT_THROW(writer.put_text("completions", 11, "again"), InputError);
    writer.put_text("completions", 13, "after reopen");
  }
  const ResultsReader reader(path);
  EXPECT_EQ(reader.text_stores(), (std::vector<std::string>{"completions", "logs"}));
  EXPECT_EQ(reader.text("completions", 11), program);
  EXPECT_EQ(reader.text("completions", 12), "");
  EXPECT_EQ(reader.text("completions", 13), "after reopen");
  EXPECT_EQ(reader.text("completions", 14), std::nullopt);
  EXPECT_EQ(reader.text("logs", 10), "nvcc: ok");
  EXPECT_EQ(reader.texts("completions"),
            (std::map<std::int64_t, std::string>{
                {10, "first"}, {11, program}, {12, ""}, {13, "after reopen"}}));
  EXPECT_THROW(reader.texts("absent"), InputError);
  EXPECT_THROW(reader.text("absent", 1), InputError);
  EXPECT_TRUE(reader.tables().empty());  // text stores are not tables
}

}  // namespace
}  // namespace crl::results

namespace crl::results {
namespace {

// An extent is only a claim: a small file that says a column holds 2^40 rows must be refused
// before a vector of 2^40 values is made (it was a bad_alloc).
TEST(ResultsFile, ExtentsBeyondWhatTheFileHoldsAreRefusedBeforeAllocating) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    batch.add_row({std::int64_t{1}, 1.0, true, "a"});
    writer.append("steps", batch);
  }
  for (const char* column : {"step", "reward", "correct", "task"}) {
    const hid_t file = CRL_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    const hid_t dataset = CRL_H5_CHECK(H5Dopen2(file, fmt::format("steps/{}", column).c_str(), H5P_DEFAULT));
    const hsize_t huge = hsize_t{1} << 40;
    CRL_H5_CHECK(H5Dset_extent(dataset, &huge));  // unallocated chunks: the file stays small
    CRL_H5_CHECK(H5Dclose(dataset));
    CRL_H5_CHECK(H5Fclose(file));
  }
  ASSERT_LT(std::filesystem::file_size(path), 1u << 20);
  // Refused when the file opens, before any column is read.
  const auto msg = message_of([&] { ResultsReader reader(path); });
  EXPECT_NE(msg.find("column '/steps/step' of '" + path + "' claims 1099511627776 rows of 8 bytes, more than its"),
            std::string::npos)
      << msg;
}

// Table, column and store names are validated as the writer validates them, whether they come
// from the caller or from the file's own column list, so "../meta" never reaches HDF5 as a path.
TEST(ResultsFile, NamesThatAreNotResultNamesAreRefused) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    writer.set_meta("note", "x");
  }
  {
    const ResultsReader reader(path);
    EXPECT_NE(message_of([&] { reader.rows("../meta"); }).find("bad table name '../meta'"), std::string::npos);
    EXPECT_NE(message_of([&] { reader.column("steps", "../meta"); }).find("bad column name '../meta'"),
              std::string::npos);
    EXPECT_NE(message_of([&] { reader.text("a/b", 1); }).find("bad text name 'a/b'"), std::string::npos);
  }
  {
    // A file whose column list names "../meta" (the writer never writes one).
    const hid_t file = CRL_H5_CHECK(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    const hid_t group = CRL_H5_CHECK(H5Gopen2(file, "steps", H5P_DEFAULT));
    detail::write_string_list_attribute(group, detail::kColumnsAttribute, {"../meta"});
    CRL_H5_CHECK(H5Gclose(group));
    CRL_H5_CHECK(H5Fclose(file));
  }
  const auto msg = message_of([&] { ResultsReader reader(path); });
  EXPECT_NE(msg.find("lists a column the writer would refuse: bad column name '../meta'"), std::string::npos) << msg;
}

// ---- the shadow (crash consistency; kills at every write: tests/kill) ------------------------------

TEST(ResultsFile, TheFileAppearsAtTheFirstFlushAndNoShadowOutlivesTheWriter) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);  // its constructor flushes: a valid, empty file from here on
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::exists(path + ".shadow"));
    writer.declare_table("steps", kSchema);
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".shadow"));
  EXPECT_EQ(ResultsReader(path).rows("steps"), 0);
}

// Every commit method writes the same file.
TEST(ResultsFile, EveryCommitMethodGivesTheSameRows) {
  ScratchDir dir;
  for (const auto method : {CommitMethod::exchange, CommitMethod::link, CommitMethod::copy}) {
    const auto path = dir.file(fmt::format("run{}.h5", static_cast<int>(method)));
    for (int open = 0; open < 2; ++open) {
      ResultsWriter writer(path, {.chunk_rows = 2, .commit = method});
      writer.declare_table("steps", kSchema);
      for (std::int64_t step = 0; step < 3; ++step) {
        RowBatch batch(kSchema);
        batch.add_row({open * 3 + step, 0.5, step % 2 == 0, fmt::format("task {}", step)});
        writer.append("steps", batch);
        writer.put_text("logs", open * 3 + step, std::string(100 * static_cast<std::size_t>(step + 1), 'x'));
        writer.flush();
      }
    }
    const ResultsReader reader(path);
    EXPECT_EQ(column_of<std::int64_t>(reader, "steps", "step"), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(reader.text("logs", 5), std::string(300, 'x'));
    EXPECT_FALSE(std::filesystem::exists(path + ".shadow"));
  }
}

// A writer killed in its first commit, between linking the shadow to the file's name and
// unlinking the shadow's own, leaves both names on one inode: the next writer must unlink the
// stale shadow, not truncate it (which would empty the file).
TEST(ResultsFile, AStaleShadowThatIsTheFileItselfIsUnlinkedNotTruncated) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    RowBatch batch(kSchema);
    batch.add_row({std::int64_t{7}, 1.0, true, "kept"});
    writer.append("steps", batch);
  }
  std::filesystem::create_hard_link(path, path + ".shadow");
  {
    ResultsWriter writer(path);
    EXPECT_EQ(writer.declare_table("steps", kSchema), 1);
  }
  EXPECT_EQ(column_of<std::string>(ResultsReader(path), "steps", "task"), (std::vector<std::string>{"kept"}));
}

TEST(ResultsFile, AFileThatAppearedBeforeTheFirstCommitIsNotReplaced) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  ResultsWriter writer(path);
  writer.close();
  std::filesystem::remove(path);
  write_bytes(path, "someone else's");
  ResultsWriter again(dir.file("other.h5"));
  EXPECT_EQ(read_bytes(path), "someone else's");
}

// ---- validation before reading ---------------------------------------------------------------------

TEST(ResultsFile, ValidateNamesAMissingColumnAWrongTypeAndBadMetaJson) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    writer.set_meta("eval_options", "[1, 2]");
    writer.set_meta("earlier_git_commits", "[\"a\", 2]");
    writer.set_meta("deep", std::string(100, '[') + std::string(100, ']'));
  }
  const ResultsReader reader(path);
  const auto expect = [&](const ResultsExpectations& e, const std::string& part) {
    const auto msg = message_of([&] { reader.validate(e); });
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  };
  expect({.tables = {{.table = "steps", .columns = {{"speedup", ColumnType::float64}}}}}, "has no column 'speedup'");
  expect({.tables = {{.table = "steps", .columns = {{"task", ColumnType::int64}}}}}, "column 'steps/task'");
  expect({.tables = {{.table = "rollouts", .required = true}}}, "has no table 'rollouts'");
  expect({.meta = {{.key = "eval_options", .shape = MetaShape::json_object}}}, "is not a JSON object");
  expect({.meta = {{.key = "earlier_git_commits", .shape = MetaShape::json_string_list}}}, "is not a JSON list of strings");
  expect({.meta = {{.key = "deep", .shape = MetaShape::json}}}, "nested deeper than 64 levels");
  EXPECT_NO_THROW(reader.validate({.tables = {{.table = "steps", .columns = kSchema}}}));
  EXPECT_NE(message_of([&] { reader.column_as<double>("steps", "task"); }).find("holds string, not float64"),
            std::string::npos);
}

// A damaged heap (every global heap collection's signature overwritten) is the file's fault: an
// InputError naming it, never an ApiError (crl's exit 4).
TEST(ResultsFile, ADamagedHeapIsBadInputNamingTheFile) {
  ScratchDir dir;
  const auto path = dir.file("run.h5");
  {
    ResultsWriter writer(path);
    writer.declare_table("steps", kSchema);
    writer.set_meta("job_config", "{\"name\": \"x\"}");
  }
  std::string bytes = read_bytes(path);
  std::size_t damaged = 0;
  for (auto at = bytes.find("GCOL"); at != std::string::npos; at = bytes.find("GCOL", at + 4), ++damaged) {
    bytes.replace(at, 4, "XXXX");
  }
  ASSERT_GT(damaged, 0u);
  write_bytes(path, bytes);
  try {
    ResultsReader reader(path);
    FAIL() << "a damaged file was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crl::results
