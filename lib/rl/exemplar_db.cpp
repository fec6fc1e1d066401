// The exemplar database and its bucket sampling (rules in exemplar_db.h).
#include "rl/exemplar_db.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "results/results_reader.h"

namespace crl::rl {

ExemplarDatabase::ExemplarDatabase(double bucket_width) { set_bucket_width(bucket_width); }

void ExemplarDatabase::set_bucket_width(double width) {
  if (!(width > 0) || !std::isfinite(width)) throw InputError(fmt::format("exemplar bucket width must be > 0 (got {})", width));
  bucket_width_ = width;
}

void ExemplarDatabase::add(Exemplar exemplar) {
  if (!std::isfinite(exemplar.speedup) || exemplar.speedup <= 0) {
    throw InputError(fmt::format("exemplar of rollout {} for {}: speedup {} is not a positive number",
                                 exemplar.rollout_id, exemplar.task, exemplar.speedup));
  }
  by_task_[exemplar.task].push_back(std::move(exemplar));
  ++count_;
}

const std::vector<Exemplar>& ExemplarDatabase::for_task(const std::string& task) const {
  static const std::vector<Exemplar> none;
  const auto it = by_task_.find(task);
  return it == by_task_.end() ? none : it->second;
}

int64_t ExemplarDatabase::bucket_of(double speedup) const {
  return static_cast<int64_t>(std::floor(speedup / bucket_width_));
}

std::vector<ExemplarDatabase::Bucket> ExemplarDatabase::buckets(const std::string& task) const {
  std::map<int64_t, Bucket> by_key;
  for (const Exemplar& e : for_task(task)) {
    Bucket& b = by_key[bucket_of(e.speedup)];
    b.key = bucket_of(e.speedup);
    b.members.push_back(&e);
  }
  std::vector<Bucket> out;
  for (auto& [key, b] : by_key) {
    double sum = 0;
    for (const Exemplar* e : b.members) sum += e->speedup;
    b.score = sum / static_cast<double>(b.members.size());
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<double> bucket_probabilities(const std::vector<double>& scores, double tau) {
  if (!(tau > 0)) throw InputError(fmt::format("bucket sampling temperature tau must be > 0 (got {})", tau));
  std::vector<double> p(scores.size());
  if (scores.empty()) return p;
  const double top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) sum += p[i] = std::exp((scores[i] - top) / tau);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<const Exemplar*> ExemplarDatabase::sample(const std::string& task, size_t k, double tau,
                                                      std::mt19937_64& rng) const {
  std::vector<Bucket> left = buckets(task);
  std::vector<const Exemplar*> out;
  while (out.size() < k && !left.empty()) {
    std::vector<double> scores;
    for (const Bucket& b : left) scores.push_back(b.score);
    const std::vector<double> p = bucket_probabilities(scores, tau);
    std::discrete_distribution<size_t> pick_bucket(p.begin(), p.end());
    const size_t chosen = pick_bucket(rng);
    const auto& members = left[chosen].members;
    std::uniform_int_distribution<size_t> pick_member(0, members.size() - 1);
    out.push_back(members[pick_member(rng)]);
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(chosen));
  }
  return out;
}

std::string join_ids(const std::vector<int64_t>& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

std::vector<int64_t> parse_ids(const std::string& text, const std::string& origin) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string piece = text.substr(start, comma - start);
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(piece, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (piece.empty() || used != piece.size()) {
      throw InputError(fmt::format("{}: '{}' is not a comma-separated list of rollout ids", origin, text));
    }
    out.push_back(value);
    start = comma + 1;
  }
  return out;
}

ExemplarDatabase ExemplarDatabase::from_results(const results::ResultsReader& reader, double bucket_width) {
  ExemplarDatabase db(bucket_width);
  const auto tables = reader.tables();
  if (std::find(tables.begin(), tables.end(), "rollouts") == tables.end()) return db;
  const auto ids = std::get<std::vector<int64_t>>(reader.column("rollouts", "rollout_id"));
  const auto steps = std::get<std::vector<int64_t>>(reader.column("rollouts", "step"));
  const auto tasks = std::get<std::vector<std::string>>(reader.column("rollouts", "task"));
  const auto status = std::get<std::vector<std::string>>(reader.column("rollouts", "status"));
  const auto speedup = std::get<std::vector<double>>(reader.column("rollouts", "speedup"));
  const auto shown = std::get<std::vector<std::string>>(reader.column("rollouts", "exemplar_ids"));
  const auto superseded = std::get<std::vector<bool>>(reader.column("rollouts", "superseded"));
  // No store yet (a run stopped before its first crl step wrote a program): nothing to rebuild,
  // unless an ok rollout below claims a program, which is then named as missing.
  const auto stores = reader.text_stores();
  const std::map<int64_t, std::string> programs =
      std::find(stores.begin(), stores.end(), "programs") == stores.end() ? std::map<int64_t, std::string>{}
                                                                          : reader.texts("programs");
  for (size_t i = 0; i < ids.size(); ++i) {
    // As the job adds them: correct and timed (an untimed ok has speedup 0 and no bucket).
    if (status[i] != "ok" || superseded[i] || !std::isfinite(speedup[i]) || speedup[i] <= 0) continue;
    const auto program = programs.find(ids[i]);
    if (program == programs.end()) {
      throw InputError(fmt::format("{}: ok rollout {} has no text in /text/programs", reader.path(), ids[i]));
    }
    db.add({ids[i], steps[i], tasks[i], program->second, speedup[i],
            parse_ids(shown[i], fmt::format("{}: rollout {} exemplar_ids", reader.path(), ids[i]))});
  }
  return db;
}

}  // namespace crl::rl
