// Tests CRL_H5_CHECK: a failing HDF5 call throws an ApiError naming the call, file, host and
// HDF5's own error stack; a succeeding one returns its value.
#include <gtest/gtest.h>

#include "results/hdf5_check.h"

namespace crl {
namespace {

TEST(ApiChecks, Hdf5FailureCarriesCallAndErrorStack) {
  hdf5_silence_default_printing();
  try {
    CRL_H5_CHECK(H5Fopen("/nonexistent/crl.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL() << "expected an ApiError";
  } catch (const ApiError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.api(), "HDF5");
    EXPECT_NE(msg.find("H5Fopen"), std::string::npos) << msg;
    EXPECT_NE(msg.find("hdf5_check_test.cpp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("host "), std::string::npos) << msg;
    EXPECT_NE(msg.find("#0"), std::string::npos) << "HDF5's stack is missing: " << msg;
  }
}

TEST(ApiChecks, Hdf5SuccessReturnsTheValue) {
  const hid_t space = CRL_H5_CHECK(H5Screate(H5S_SCALAR));
  EXPECT_GE(space, 0);
  EXPECT_GE(CRL_H5_CHECK(H5Sclose(space)), 0);
}

}  // namespace
}  // namespace crl
