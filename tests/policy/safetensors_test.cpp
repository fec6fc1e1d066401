// Tests for safetensors reading and writing: round trips of every dtype, sharded checkpoints,
// byte-exact layout against hand-built files, and rejection of corrupt or truncated files.
#include "policy/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "golden_python.h"

namespace crl::policy {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("crl_safetensors_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  // Writes a file by hand: 8-byte little-endian length, header text, data bytes.
  fs::path make_file(const std::string& name, const std::string& header, const std::string& data,
                     int64_t length_override = -1) {
    const fs::path path = dir_ / name;
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = length_override >= 0 ? static_cast<uint64_t>(length_override) : header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << data;
    return path;
  }

  static std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Expects InputError whose message holds every one of `parts`.
  template <typename F>
  static void expect_input_error(F&& f, std::initializer_list<std::string> parts) {
    try {
      f();
      FAIL() << "expected crl::InputError";
    } catch (const InputError& e) {
      for (const auto& p : parts) {
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "message '" << e.what() << "' lacks '" << p << "'";
      }
    }
  }

  fs::path dir_;
};

std::string float_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeWithMetadata) {
  at::manual_seed(7);
  const at::Tensor base = at::randn({3, 5}) * 4;
  NamedTensors tensors = {
      {"f32", base},
      {"f16", base.to(at::kHalf)},
      {"bf16", base.to(at::kBFloat16)},
      {"f64", base.to(at::kDouble)},
      {"i64", at::arange(-7, 8, at::kLong).reshape({3, 5})},
      {"i32", at::arange(-7, 8, at::kInt)},
      {"i16", at::arange(-7, 8, at::kShort)},
      {"i8", at::arange(-7, 8, at::kChar)},
      {"u8", at::arange(0, 250, 17, at::kByte)},
      {"bool", base > 0},
      {"f8_e4m3", base.to(at::kFloat8_e4m3fn)},
      {"f8_e5m2", base.to(at::kFloat8_e5m2)},
      {"scalar", at::scalar_tensor(2.5)},
      {"empty", at::empty({0, 4})},
      {"strided", base.t()},  // non-contiguous: written contiguous
  };
  const fs::path path = dir_ / "all.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "crl test"}});

  SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "crl test");
  EXPECT_EQ(file.entries().size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    const at::Tensor got = file.tensor(name);
    EXPECT_EQ(got.scalar_type(), expected.scalar_type());
    EXPECT_EQ(got.sizes(), expected.sizes());
    // Compare bit patterns (F8 types have no arithmetic comparison on CPU).
    const at::Tensor e = expected.contiguous();
    ASSERT_EQ(got.nbytes(), e.nbytes());
    if (e.nbytes() > 0) EXPECT_EQ(std::memcmp(got.data_ptr(), e.data_ptr(), e.nbytes()), 0);
  }
  EXPECT_EQ(file.entry("f64").dtype, "F64");
  EXPECT_EQ(file.entry("f8_e4m3").dtype, "F8_E4M3");
  EXPECT_EQ(file.entry("bool").dtype, "BOOL");
}

TEST_F(SafetensorsTest, WritesTheReferenceLayoutByteForByte) {
  // Aligned, sorted by element size then name, header padded with spaces to 8 bytes.
  write_safetensors(dir_ / "w.safetensors",
                    {{"b", at::tensor({1.0f, 2.0f})}, {"a", at::tensor({7}, at::kByte)}});
  const std::string bytes = read_bytes(dir_ / "w.safetensors");
  const std::string header =
      R"({"a":{"data_offsets":[8,9],"dtype":"U8","shape":[1]},)"
      R"("b":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::string padded = header;
  padded.append((8 - padded.size() % 8) % 8, ' ');
  std::string expected(8, '\0');
  for (int i = 0; i < 8; ++i) expected[i] = static_cast<char>((padded.size() >> (8 * i)) & 0xff);
  expected += padded + float_bytes({1.0f, 2.0f}) + std::string(1, '\x07');
  EXPECT_EQ(bytes, expected);
}

TEST_F(SafetensorsTest, ReadsAHandBuiltFileAndCopiesUnalignedData) {
  // Header of odd length: the F32 data starts at an unaligned file offset.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  const fs::path path = make_file("odd.safetensors", header, float_bytes({1.5f, -2.0f}));
  SafetensorsFile file(path);
  const at::Tensor x = file.tensor("x");
  EXPECT_TRUE(at::equal(x, at::tensor({1.5f, -2.0f})));
}

TEST_F(SafetensorsTest, TensorsAreCopyOnWriteAndOutliveTheFileObject) {
  write_safetensors(dir_ / "c.safetensors", {{"x", at::ones({4})}});
  at::Tensor x;
  {
    SafetensorsFile file(dir_ / "c.safetensors");
    x = file.tensor("x");
  }
  x.mul_(3);  // must not fault (private mapping) nor change the file
  EXPECT_TRUE(at::equal(x, at::full({4}, 3.0f)));
  EXPECT_TRUE(at::equal(SafetensorsFile(dir_ / "c.safetensors").tensor("x"), at::ones({4})));
}

TEST_F(SafetensorsTest, ShardedCheckpointRoundTrip) {
  NamedTensors tensors;
  for (int i = 0; i < 5; ++i) {
    tensors.emplace_back("layer." + std::to_string(i) + ".weight", at::full({16}, float(i)));
  }
  write_sharded_safetensors(dir_ / "ckpt", tensors, 2 * 16 * 4, {{"format", "pt"}});
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "model-00001-of-00003.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "ckpt" / "model-00003-of-00003.safetensors"));
  const auto index = nlohmann::json::parse(read_bytes(dir_ / "ckpt" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 5 * 16 * 4);
  EXPECT_EQ(index["weight_map"]["layer.4.weight"], "model-00003-of-00003.safetensors");

  SafetensorsCheckpoint ckpt(dir_ / "ckpt");
  EXPECT_EQ(ckpt.shard_count(), 3u);
  ASSERT_EQ(ckpt.names().size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(at::equal(ckpt.tensor("layer." + std::to_string(i) + ".weight"),
                          at::full({16}, float(i))));
  }
  EXPECT_EQ(ckpt.metadata().at("format"), "pt");
  EXPECT_EQ(ckpt.load_all().size(), 5u);
  expect_input_error([&] { ckpt.tensor("nope"); }, {"nope"});

  // A single file opens the same way, by file or by directory.
  write_safetensors(dir_ / "single" / "model.safetensors", tensors);
  EXPECT_EQ(SafetensorsCheckpoint(dir_ / "single").shard_count(), 1u);
  EXPECT_TRUE(at::equal(SafetensorsCheckpoint(dir_ / "single" / "model.safetensors")
                            .tensor("layer.2.weight"),
                        at::full({16}, 2.0f)));
}

TEST_F(SafetensorsTest, RejectsBadIndexes) {
  write_safetensors(dir_ / "a.safetensors", {{"x", at::ones({2})}});
  auto write_index = [&](const std::string& text) {
    std::ofstream(dir_ / "model.safetensors.index.json") << text;
    return dir_ / "model.safetensors.index.json";
  };
  expect_input_error([&] { SafetensorsCheckpoint c(write_index(R"({"weight_map":{"y":"a.safetensors"}})")); },
                     {"'y'", "a.safetensors"});
  expect_input_error([&] { SafetensorsCheckpoint c(write_index(R"({"weight_map":{"x":"../a.safetensors"}})")); },
                     {"not a plain file name"});
  expect_input_error([&] { SafetensorsCheckpoint c(write_index(R"({"weight_map":)")); },
                     {"not valid JSON"});
  expect_input_error([&] { SafetensorsCheckpoint c(write_index(R"({"metadata":{}})")); },
                     {"weight_map"});
  EXPECT_THROW(SafetensorsCheckpoint c(write_index(R"({"weight_map":{"x":"missing.safetensors"}})")),
               IoError);
}

TEST_F(SafetensorsTest, TruncatedFileNamesTheFileAndTheTensor) {
  write_safetensors(dir_ / "t.safetensors",
                    {{"first", at::ones({8})}, {"second.weight", at::ones({8})}});
  std::string bytes = read_bytes(dir_ / "t.safetensors");
  bytes.resize(bytes.size() - 5);
  std::ofstream(dir_ / "cut.safetensors", std::ios::binary) << bytes;
  expect_input_error([&] { SafetensorsFile f(dir_ / "cut.safetensors"); },
                     {"cut.safetensors", "second.weight", "truncated"});
  // Cut inside the header: the length field now points past the end.
  std::ofstream(dir_ / "cut2.safetensors", std::ios::binary) << bytes.substr(0, 20);
  expect_input_error([&] { SafetensorsFile f(dir_ / "cut2.safetensors"); },
                     {"cut2.safetensors", "header length"});
  std::ofstream(dir_ / "tiny.safetensors", std::ios::binary) << "abc";
  expect_input_error([&] { SafetensorsFile f(dir_ / "tiny.safetensors"); }, {"too short"});
}

TEST_F(SafetensorsTest, RejectsCorruptHeaders) {
  const std::string eight = float_bytes({1, 2});
  struct Case {
    const char* what;
    std::string header;
    std::string data;
    std::vector<std::string> message_parts;
  };
  const std::vector<Case> cases = {
      {"bad json", R"({"x":{"dtype":"F32",)", eight, {"not valid JSON"}},
      {"not an object", R"(["x"])", "", {"does not start with '{'"}},
      {"duplicate name",
       R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, {"'x'", "twice"}},
      {"size mismatch", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight,
       {"'w'", "needs 12"}},
      {"unknown dtype", R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,8]}})", eight,
       {"'w'", "unknown dtype 'F128'"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, {"'b'", "overlap"}},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight, {"'a'", "gap"}},
      {"trailing bytes", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight,
       {"cover 4 bytes", "holds 8"}},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight,
       {"'a'", "non-negative"}},
      {"offsets reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight,
       {"'a'", "end before"}},
      {"unknown field", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", eight,
       {"'a'", "unknown header field 'x'"}},
      {"metadata not strings", R"({"__metadata__":{"n":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       eight, {"__metadata__", "'n'"}},
      {"bad bool", R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", std::string("\x01\x07"),
       {"'b'", "not 0 or 1"}},
      {"overflowing shape",
       R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight,
       {"'a'", "overflow"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path path = make_file("bad.safetensors", c.header, c.data);
    try {
      SafetensorsFile f(path);
      ADD_FAILURE() << "accepted a file with " << c.what;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos) << e.what();
      for (const auto& p : c.message_parts) {
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "message '" << e.what() << "' lacks '" << p << "'";
      }
    }
  }
  // A length field far beyond the file.
  expect_input_error(
      [&] { SafetensorsFile f(make_file("huge.safetensors", "{}", "", int64_t{1} << 40)); },
      {"huge.safetensors", "header length"});
}

TEST_F(SafetensorsTest, RejectsBadTensorsOnWrite) {
  EXPECT_THROW(write_safetensors(dir_ / "d.safetensors", {{"a", at::ones({1})}, {"a", at::ones({1})}}),
               InputError);
  EXPECT_THROW(write_safetensors(dir_ / "d.safetensors", {{"", at::ones({1})}}), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "d.safetensors"));
  // Nothing but the final file is left behind by a successful write.
  write_safetensors(dir_ / "ok.safetensors", {{"a", at::ones({1})}});
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);
}

// The reference library reads crl's file, finds the tensors and metadata crl wrote, and writes the
// same tensors with the same layout: an equal header (as JSON: the library orders keys by offset,
// crl alphabetically) and a byte-identical data buffer.
TEST_F(SafetensorsTest, TheSafetensorsLibraryReadsWhatCrlWritesAndWritesTheSameLayout) {
  const fs::path python = testing::golden_python();
  if (python.empty()) GTEST_SKIP() << "no Python with safetensors (tools/setup.sh installs it into the shared venv)";
  const fs::path file = dir_ / "crl.safetensors";
  write_safetensors(file,
                    {{"weight", at::arange(6, at::kFloat).reshape({2, 3}) - 2.5},
                     {"half", at::tensor({0.5, -1.0, 3.0}).to(at::kBFloat16)},
                     {"ids", at::tensor({int64_t{7}, int64_t{-1}})},
                     {"mask", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
                     {"byte", at::tensor({9}, at::kByte)},
                     {"empty", at::empty({0, 4}, at::kFloat)}},
                    {{"format", "pt"}, {"note", "crl"}});
  const std::string script = R"(
import json, sys, torch
from safetensors import safe_open
from safetensors.torch import load_file, save
path = sys.argv[1]
tensors = load_file(path)
with safe_open(path, framework="pt") as f:
    metadata = f.metadata()
expect = {"weight": ([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.5]], torch.float32), "half": ([0.5, -1.0, 3.0], torch.bfloat16),
          "ids": ([7, -1], torch.int64), "mask": ([True, False, True], torch.bool), "byte": ([9], torch.uint8),
          "empty": ([], torch.float32)}
problems = []
if sorted(tensors) != sorted(expect): problems.append("names %s" % sorted(tensors))
for name, (values, dtype) in expect.items():
    t = tensors.get(name)
    if t is None: continue
    if t.dtype != dtype: problems.append("%s dtype %s" % (name, t.dtype))
    if name == "empty":
        if list(t.shape) != [0, 4]: problems.append("empty shape %s" % list(t.shape))
    elif t.tolist() != values: problems.append("%s values %s" % (name, t.tolist()))
if metadata != {"format": "pt", "note": "crl"}: problems.append("metadata %s" % metadata)
ours = open(path, "rb").read()
theirs = save(tensors, metadata)
def split(b):
    n = int.from_bytes(b[:8], "little")
    return json.loads(b[8:8 + n]), b[8 + n:], n
(h1, d1, n1), (h2, d2, n2) = split(ours), split(theirs)
if h1 != h2: problems.append("headers differ: %s vs %s" % (h1, h2))
if d1 != d2: problems.append("data buffers differ")
if n1 % 8 or n2 % 8: problems.append("header lengths %d %d not 8-aligned" % (n1, n2))
print("same" if not problems else "; ".join(problems))
)";
  const auto r = run_command({python.string(), "-c", script, file.string()}, {.timeout = std::chrono::minutes(2)});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "same\n");
}

// Regression: this binary links LibTorch, whose PyPI wheel exports a std::filesystem::remove_all
// that crashed here until cmake/CrlDependencies.cmake put libstdc++ first on the link line.
TEST(TorchLinkTest, StdFilesystemRemoveAllWorks) {
  const fs::path dir = fs::temp_directory_path() / ("crl_remove_all_" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "file") << "x";
  std::error_code ec;
  EXPECT_EQ(fs::remove_all(dir, ec), 3u);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace crl::policy
