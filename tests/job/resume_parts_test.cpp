// The parts of stop and resume that need no MPI job: the stop flag and its signal handlers, the
// job file comparison that refuses a changed key, and the results writer's superseded flags.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "core/error.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "rl/job_config.h"
#include "rl/stop_request.h"

namespace crl::rl {
namespace {

TEST(StopSignals, FirstSignalSetsTheFlagAndHandlersAreRestored) {
  {
    const StopSignalHandlers handlers;
    EXPECT_EQ(stop_signal(), 0);
    ASSERT_EQ(raise(SIGUSR1), 0);
    EXPECT_EQ(stop_signal(), SIGUSR1);
    ASSERT_EQ(raise(SIGUSR1), 0);  // a repeated SIGUSR1 neither ends the process nor changes the flag
    EXPECT_EQ(stop_signal(), SIGUSR1);
  }
  const StopSignalHandlers again;  // a new run starts without a stop request
  EXPECT_EQ(stop_signal(), 0);
}

TEST(StopSignals, SecondTermOrIntExitsAtOnceWith128PlusSigno) {
  EXPECT_EXIT(
      {
        const StopSignalHandlers handlers;
        raise(SIGINT);
        raise(SIGINT);
        std::exit(0);
      },
      testing::ExitedWithCode(128 + SIGINT), "");
  EXPECT_EXIT(
      {
        const StopSignalHandlers handlers;
        raise(SIGUSR1);
        raise(SIGUSR1);  // a repeated SIGUSR1 changes nothing
        raise(SIGTERM);
        std::exit(stop_signal() == SIGUSR1 ? 7 : 1);
      },
      testing::ExitedWithCode(128 + SIGTERM), "");
  EXPECT_EXIT(
      {
        {
          const StopSignalHandlers handlers;
          raise(SIGUSR1);
          raise(SIGUSR1);
          std::exit(stop_signal() == SIGUSR1 ? 7 : 1);
        }
      },
      testing::ExitedWithCode(7), "");
  // Once the handlers are gone, SIGUSR1 has its default action again (the process ends by it).
  EXPECT_EXIT(
      {
        { const StopSignalHandlers handlers; }
        raise(SIGUSR1);
        std::exit(0);
      },
      testing::KilledBySignal(SIGUSR1), "");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

const nlohmann::json kBefore = {
    {"name", "ci"},
    {"seed", "1"},
    {"stages", {{{"kind", "sft"}, {"lr", "1e-3"}}, {{"kind", "crl"}, {"lr", "1e-4"}, {"sampling", {{"top_p", "1"}}}}}}};

TEST(JobFileChanges, NamesEveryChangedKeyAsErrorsNameKeys) {
  EXPECT_TRUE(changed_job_keys(kBefore, kBefore).empty());
  nlohmann::json after = kBefore;
  after["stages"][1]["lr"] = "2e-4";
  after["stages"][1]["sampling"]["top_k"] = "5";
  after.erase("seed");
  EXPECT_EQ(changed_job_keys(kBefore, after),
            (std::vector<std::string>{"seed", "stages[1].lr", "stages[1].sampling.top_k"}));
  nlohmann::json longer = kBefore;
  longer["stages"].push_back({{"kind", "crl"}});
  EXPECT_EQ(changed_job_keys(kBefore, longer), (std::vector<std::string>{"stages[2]"}));
}

TEST(JobFileChanges, RefusesUnlessEveryChangedKeyIsAllowed) {
  nlohmann::json after = kBefore;
  after["stages"][1]["lr"] = "2e-4";
  after["name"] = "other";
  try {
    require_unchanged_job(kBefore, after, {"name"}, "job.yaml");
    FAIL() << "a changed lr was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("job.yaml"), std::string::npos) << what;
    EXPECT_NE(what.find("stages[1].lr"), std::string::npos) << what;
    EXPECT_EQ(what.find("name,"), std::string::npos) << what;  // the allowed key is not named
    EXPECT_NE(what.find("--allow-config-change stages[1].lr"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(require_unchanged_job(kBefore, after, {"name", "stages[1].lr"}, "job.yaml"));
  EXPECT_NO_THROW(require_unchanged_job(kBefore, after, {"name", "stages[1]"}, "job.yaml"));  // a key covers its subkeys
  EXPECT_THROW(require_unchanged_job(kBefore, after, {"name", "stages[1].l"}, "job.yaml"), InputError);  // not a prefix match
}

TEST(ResultsWriterFlags, SetsABoolColumnOverARangeOfRows) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::TempDir()) / "crl_set_flag";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "r.h5").string();
  const results::TableSchema schema = {{"id", results::ColumnType::int64}, {"superseded", results::ColumnType::boolean}};
  {
    results::ResultsWriter writer(path);
    writer.declare_table("rows", schema);
    results::RowBatch batch(schema);
    for (int64_t i = 0; i < 6; ++i) batch.add_row({i, false});
    writer.append("rows", batch);
    writer.set_flag("rows", "superseded", 2, 5, true);
    writer.set_flag("rows", "superseded", 3, 4, false);
    writer.set_flag("rows", "superseded", 6, 6, true);  // an empty range at the end is fine
    EXPECT_THROW(writer.set_flag("rows", "superseded", 4, 7, true), InputError);
    EXPECT_THROW(writer.set_flag("rows", "id", 0, 1, true), InputError);
    EXPECT_THROW(writer.set_flag("rows", "missing", 0, 1, true), InputError);
    writer.close();
  }
  const results::ResultsReader reader(path);
  EXPECT_EQ(std::get<std::vector<bool>>(reader.column("rows", "superseded")),
            (std::vector<bool>{false, false, true, false, true, false}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(reader.column("rows", "id")), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace crl::rl
