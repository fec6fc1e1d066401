// Tests CRL_MPI_CHECK in its own program: MPI_Init changes the environment the other tests read.
#include <gtest/gtest.h>

#include "dist/mpi_check.h"

namespace crl {
namespace {

// MPI stays initialised for the whole test program (Open MPI cannot initialise twice).
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { MPI_Init(nullptr, nullptr); }
  void TearDown() override { MPI_Finalize(); }
};
const auto* const kMpiEnvironment = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

TEST(ApiChecks, MpiFailureNamesTheCall) {
  // Feed the macro an error code directly, as a failing MPI call would return it.
  try {
    CRL_MPI_CHECK(MPI_ERR_COUNT);
    FAIL() << "expected an ApiError";
  } catch (const ApiError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.api(), "MPI");
    EXPECT_NE(msg.find("MPI_ERR_COUNT"), std::string::npos) << msg;
    EXPECT_NE(msg.find("count"), std::string::npos) << "MPI's own message is missing: " << msg;
  }
}

}  // namespace
}  // namespace crl
