// read_file and read_input_file: contents, the size bound, what is not a regular file, and which
// error a missing file is (IoError from read_file, InputError from read_input_file).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/read_file.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

class ReadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crl-read-file-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  fs::path dir_;
};

TEST_F(ReadFileTest, ReturnsTheBytesIncludingNulsAndAnEmptyFile) {
  const std::string bytes("a\0b\nc", 5);
  EXPECT_EQ(read_file(write("x.bin", bytes), "test file"), bytes);
  EXPECT_EQ(read_file(write("empty", ""), "test file"), "");
}

TEST_F(ReadFileTest, LargerThanTheBoundIsAnInputErrorNamingTheFile) {
  const fs::path p = write("big", std::string(100, 'x'));
  EXPECT_EQ(read_file(p, "test file", 100).size(), 100u);
  try {
    read_file(p, "job file", 99);
    FAIL() << "a 100-byte file passed a 99-byte bound";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job file '" + p.string() + "' holds 100 bytes"), std::string::npos) << e.what();
  }
}

TEST_F(ReadFileTest, AFolderIsNotARegularFile) {
  EXPECT_THROW(read_file(dir_, "test file"), InputError);
  EXPECT_THROW(read_input_file(dir_, "test file"), InputError);
}

TEST_F(ReadFileTest, MissingIsAnIoErrorOrForAUserNamedFileAnInputError) {
  const fs::path missing = dir_ / "missing.yaml";
  EXPECT_THROW(read_file(missing, "job file"), IoError);
  try {
    read_input_file(missing, "job file");
    FAIL() << "a missing file was read";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("job file"), std::string::npos) << what;
    EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace crl
