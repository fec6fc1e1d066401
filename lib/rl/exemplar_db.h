// The exemplar database: every correct program the job has seen, per task, with its measured
// speedup and provenance, and CUDA-L1's bucket sampling of the K exemplars a prompt shows.
//
// Bucket sampling: a task's programs fall into speedup buckets [k w, (k+1) w) of width w; a
// bucket's score is the mean speedup of its programs. K distinct buckets are drawn one after
// another without replacement, each with probability softmax(score / tau) over the buckets not
// yet drawn; from each drawn bucket one program is taken uniformly. Low tau favours the fastest
// buckets, high tau approaches a uniform choice among buckets. Fewer than K buckets: one program
// from each (ordered as drawn).
//
// The database is not stored apart: it is the results file's ok rollouts (rebuilt on resume).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace crl::results {
class ResultsReader;
}

namespace crl::rl {

struct Exemplar {
  int64_t rollout_id = -1;
  int64_t step = -1;
  std::string task;
  std::string program;
  double speedup = 0;
  std::vector<int64_t> shown_exemplars;  // rollout ids of the exemplars its prompt showed
};

class ExemplarDatabase {
 public:
  explicit ExemplarDatabase(double bucket_width = 0.25);

  // Adds a correct program; throws InputError for a non-finite or non-positive speedup.
  void add(Exemplar exemplar);
  const std::vector<Exemplar>& for_task(const std::string& task) const;
  size_t size() const { return count_; }
  // Buckets are formed when sampling, so a later stage may use another width on the same programs.
  void set_bucket_width(double width);
  double bucket_width() const { return bucket_width_; }

  // Bucket of a speedup: floor(speedup / width).
  int64_t bucket_of(double speedup) const;
  // The task's buckets, ascending, each with its score (mean speedup) and its programs.
  struct Bucket {
    int64_t key = 0;
    double score = 0;
    std::vector<const Exemplar*> members;
  };
  std::vector<Bucket> buckets(const std::string& task) const;

  // K exemplars from distinct buckets (see above); empty when the task has none.
  std::vector<const Exemplar*> sample(const std::string& task, size_t k, double tau, std::mt19937_64& rng) const;

  // Every ok rollout with a measured speedup (> 0) of a results file that no restart superseded,
  // in row order: what the job added while it wrote them.
  static ExemplarDatabase from_results(const results::ResultsReader& reader, double bucket_width);

 private:
  double bucket_width_;
  std::map<std::string, std::vector<Exemplar>> by_task_;
  size_t count_ = 0;
};

// softmax(scores / tau), computed stably.
std::vector<double> bucket_probabilities(const std::vector<double>& scores, double tau);

// "3,17,42" and back; the parse throws InputError on anything but comma-separated integers.
std::string join_ids(const std::vector<int64_t>& ids);
std::vector<int64_t> parse_ids(const std::string& text, const std::string& origin);

}  // namespace crl::rl
