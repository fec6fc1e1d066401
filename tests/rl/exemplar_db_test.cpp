// The exemplar database: bucket sampling against its softmax, and the rebuild from a results file.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "results/results_reader.h"
#include "results/results_writer.h"
#include "rl/exemplar_db.h"
#include "rl/job_tables.h"

namespace crl::rl {
namespace {

// Buckets of width 0.25: {0.5}, {1.0, 1.1}, {2.0}, {3.0}; scores 0.5, 1.05, 2.0, 3.0.
ExemplarDatabase four_buckets() {
  ExemplarDatabase db(0.25);
  int64_t id = 0;
  for (double s : {0.5, 1.0, 1.1, 2.0, 3.0}) db.add({id++, 0, "t", "p" + std::to_string(id), s, {}});
  db.add({99, 0, "other", "q", 9.0, {}});  // another task's program is never drawn for "t"
  return db;
}

TEST(ExemplarDb, BucketsAndScores) {
  auto db = four_buckets();
  const auto buckets = db.buckets("t");
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_DOUBLE_EQ(buckets[1].score, 1.05);
  EXPECT_EQ(buckets[1].members.size(), 2u);
  std::mt19937_64 rng(1);
  EXPECT_TRUE(db.sample("none", 2, 1.0, rng).empty());
  EXPECT_THROW(db.add({1, 0, "t", "x", 0.0, {}}), InputError);
  EXPECT_THROW(db.add({1, 0, "t", "x", NAN, {}}), InputError);
}

// Draws K = 2 exemplars N times and compares with the sampling rule: the first bucket has
// probability p_i = softmax(score / tau)_i, the second, given the first, p_j / (1 - p_i).
// Tolerance: each frequency within 5 binomial standard deviations of its probability, so a
// correct sampler fails one check with probability about 6e-7 (about 1e-5 for all checks of the
// test); the seed is fixed, so the outcome is reproducible. A sampler that ignored the scores
// (uniform buckets: 0.25 each) is off by more than 40 standard deviations in the top bucket.
TEST(ExemplarDb, BucketFrequenciesMatchTheSoftmax) {
  const auto db = four_buckets();
  const std::vector<double> scores = {0.5, 1.05, 2.0, 3.0};
  for (double tau : {1.0, 0.5}) {
    const std::vector<double> p = bucket_probabilities(scores, tau);
    std::mt19937_64 rng(1234);
    const int n = 40000;
    std::map<int64_t, int> first;
    std::map<std::pair<int64_t, int64_t>, int> pairs;
    std::map<int64_t, int> members_of_bucket_1;
    for (int i = 0; i < n; ++i) {
      const auto drawn = db.sample("t", 2, tau, rng);
      ASSERT_EQ(drawn.size(), 2u);
      const int64_t a = db.bucket_of(drawn[0]->speedup), b = db.bucket_of(drawn[1]->speedup);
      ASSERT_NE(a, b) << "two exemplars from one bucket";
      ASSERT_EQ(drawn[0]->task, "t");
      ++first[a];
      ++pairs[{a, b}];
      for (const Exemplar* e : drawn) {
        if (db.bucket_of(e->speedup) == 4) ++members_of_bucket_1[e->rollout_id];
      }
    }
    const std::vector<int64_t> keys = {2, 4, 8, 12};  // floor(speedup / 0.25) of each bucket
    const auto within = [&](double count, double trials, double prob, const std::string& what) {
      const double sd = std::sqrt(trials * prob * (1 - prob));
      EXPECT_NEAR(count, trials * prob, 5 * sd + 1e-9) << what << " tau " << tau;
    };
    for (size_t i = 0; i < keys.size(); ++i) {
      within(first[keys[i]], n, p[i], "first draw from bucket " + std::to_string(keys[i]));
      for (size_t j = 0; j < keys.size(); ++j) {
        if (i == j) continue;
        within(pairs[{keys[i], keys[j]}], n, p[i] * p[j] / (1 - p[i]),
               "pair " + std::to_string(keys[i]) + "," + std::to_string(keys[j]));
      }
    }
    // Within a bucket the choice is uniform: rollouts 1 and 2 share bucket 4.
    const double in_bucket = members_of_bucket_1[1] + members_of_bucket_1[2];
    within(members_of_bucket_1[1], in_bucket, 0.5, "member 1 of bucket 4");
  }
}

TEST(ExemplarDb, FewerBucketsThanKGivesOnePerBucket) {
  ExemplarDatabase db(0.25);
  db.add({1, 0, "t", "a", 1.0, {}});
  db.add({2, 0, "t", "b", 1.05, {}});  // same bucket
  std::mt19937_64 rng(1);
  EXPECT_EQ(db.sample("t", 3, 1.0, rng).size(), 1u);
}

TEST(ExemplarDb, IdListsRoundTripAndRejectJunk) {
  EXPECT_EQ(join_ids({3, 17, 42}), "3,17,42");
  EXPECT_EQ(parse_ids("3,17,42", "x"), (std::vector<int64_t>{3, 17, 42}));
  EXPECT_TRUE(parse_ids("", "x").empty());
  EXPECT_THROW(parse_ids("3,,4", "x"), InputError);
  EXPECT_THROW(parse_ids("3,a", "x"), InputError);
}

TEST(ExemplarDb, RebuiltFromTheResultsFile) {
  const std::string path = testing::TempDir() + "/exemplar_rebuild.h5";
  std::filesystem::remove(path);
  {
    results::ResultsWriter writer(path);
    writer.declare_table("rollouts", rollouts_schema());
    std::vector<RolloutRow> rows(4);
    const char* status[] = {"ok", "mismatch", "ok", "ok"};
    for (int i = 0; i < 4; ++i) {
      rows[i].rollout_id = 10 + i;
      rows[i].step = i;
      rows[i].task = "level1/019_relu";
      rows[i].status = status[i];
      rows[i].speedup = 1.0 + i;
      rows[i].exemplar_ids = i == 2 ? "10" : "";
      rows[i].superseded = i == 3;  // a restart re-did its step: not an exemplar
      writer.put_text("programs", 10 + i, "program " + std::to_string(i));
    }
    writer.append("rollouts", rollout_rows(rows));
    writer.close();
  }
  const results::ResultsReader reader(path);
  const ExemplarDatabase db = ExemplarDatabase::from_results(reader, 0.25);
  ASSERT_EQ(db.size(), 2u);
  const auto& got = db.for_task("level1/019_relu");
  EXPECT_EQ(got[0].rollout_id, 10);
  EXPECT_EQ(got[1].program, "program 2");
  EXPECT_DOUBLE_EQ(got[1].speedup, 3.0);
  EXPECT_EQ(got[1].shown_exemplars, (std::vector<int64_t>{10}));
  EXPECT_EQ(got[1].step, 2);
}

// A run stopped after its sft stage has /rollouts (declared, maybe with failures) but no program
// store yet: the database is empty, not an error; an ok rollout without its program still is.
TEST(ExemplarDb, RebuiltEmptyWhenNoProgramWasStoredYet) {
  const std::string path = testing::TempDir() + "/exemplar_rebuild_empty.h5";
  std::filesystem::remove(path);
  {
    results::ResultsWriter writer(path);
    writer.declare_table("rollouts", rollouts_schema());
    std::vector<RolloutRow> rows(1);
    rows[0].rollout_id = 0;
    rows[0].task = "level1/019_relu";
    rows[0].status = "format_error";
    writer.append("rollouts", rollout_rows(rows));
    writer.close();
  }
  EXPECT_EQ(ExemplarDatabase::from_results(results::ResultsReader(path), 0.25).size(), 0u);
  {
    results::ResultsWriter writer(path);
    std::vector<RolloutRow> rows(1);
    rows[0].rollout_id = 1;
    rows[0].task = "level1/019_relu";
    rows[0].status = "ok";
    rows[0].speedup = 1.5;
    writer.declare_table("rollouts", rollouts_schema());
    writer.append("rollouts", rollout_rows(rows));
    writer.close();
  }
  EXPECT_THROW(ExemplarDatabase::from_results(results::ResultsReader(path), 0.25), InputError);
}

}  // namespace
}  // namespace crl::rl
