// The judge's request handlers (see judge_session.h and docs/evaluation.md).
#include "worker/judge_session.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/error.h"
#include "worker/kernelbench_rule.h"
#include "worker/output_comparison.h"
#include "program/arguments.h"
#include "program/value_mix.h"
#include "worker/float64_reference.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

#include "worker/idle_probe.h"
#endif

namespace crl::worker {
namespace {

using Clock = std::chrono::steady_clock;

int64_t bytes_of(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.defined() ? static_cast<int64_t>(t.nbytes()) : 0;
  return n;
}

// The domain probe's reference runs, at most: one per kind dropped costs about log2(kinds) runs.
constexpr int kMaxValueProbeRuns = 32;

const char* mix_kind_name(uint32_t bit) {
  return bit == kMixSigns ? "signs" : bit == kMixMagnitudes ? "magnitudes" : "constants drawn";
}

std::vector<OutputMeta> metas_of(const std::vector<at::Tensor>& tensors) {
  std::vector<OutputMeta> metas;
  for (const auto& t : tensors) metas.push_back({meta_of(t), t.is_cuda() ? "cuda" : "cpu"});
  return metas;
}

}  // namespace

JudgeSession::JudgeSession() = default;
JudgeSession::~JudgeSession() {
  importer_.close_all();
  unmap_shared_memory(output_region_, output_region_bytes_);
}

nlohmann::json JudgeSession::handle(const nlohmann::json& request) {
  const Op op = request_op(request);
  if (op == Op::load) return answer<LoadRequest>(*this, request);
  if (!reference_) throw InputError(fmt::format("request '{}' before 'load'", op_name(op)));
  nlohmann::json reply = serve(op, request);
  // A card too small for the judge's, the reference worker's and the candidate's peaks at once
  // (eval/memory_plan.h): the judge's temporaries go back after each request, so that its peaks
  // and the workers' take turns.
  if (release_after_requests_) device_.release_cached_memory();
  return reply;
}

nlohmann::json JudgeSession::serve(Op op, const nlohmann::json& request) {
  switch (op) {
    case Op::memory_share: return answer<MemoryShareRequest>(*this, request);
    case Op::reference: return answer<ReferenceRequest>(*this, request);
    case Op::batch_copy: return answer<BatchCopyRequest>(*this, request);
    case Op::arena: return answer<ArenaRequest>(*this, request);
    case Op::adopt_arena: return answer<AdoptArenaRequest>(*this, request);
    case Op::drop_arena: return answer<DropArenaRequest>(*this, request);
    case Op::fill: return answer<FillRequest>(*this, request);
    case Op::reference_slot: return answer<ReferenceSlotRequest>(*this, request);
    case Op::empty: return answer<EmptyRequest>(*this, request);
    case Op::flush: return answer<FlushRequest>(*this, request);
    case Op::call_time: return answer<CallTimeRequest>(*this, request);
    case Op::compare: return answer<CompareRequest>(*this, request);
    case Op::check_inputs: return answer<CheckInputsRequest>(*this, request);
    case Op::probe: return answer<ProbeRequest>(*this, request);
    case Op::values: return answer<ValuesRequest>(*this, request);
    case Op::release: return answer<ReleaseRequest>(*this, request);
    default: throw InputError(fmt::format("the judge does not serve '{}'", op_name(op)));
  }
}

NoReply JudgeSession::on(const DropArenaRequest& request) {
  // (on the GPU, a worker's own memory, let go before the worker ends; the CPU's memfds stay for the task)
  if (device_.is_cuda()) arena_named(request.which).release();
  return {};
}

NoReply JudgeSession::on(const MemoryShareRequest& request) {
  if (request.cache_bytes >= 0) cache_budget_bytes_ = request.cache_bytes;
  release_after_requests_ = request.release_after_requests;
  evict_to(cache_budget_bytes_);
  device_.release_cached_memory();
  if (device_.is_cuda()) device_.set_share(request.gpu_memory_fraction);
  return {};
}

NoReply JudgeSession::on(const EmptyRequest&) {
  device_.synchronize();
  return {};
}

LoadReply JudgeSession::on(const LoadRequest& request) {
  spec_ = load_spec(request, &scale_);
  device_.init(request.device);
  cache_budget_bytes_ = request.cache_bytes;
  // A spec whose arguments alone exceed the GPU's memory is refused before anything is made.
  if (const int64_t card = device_.card_bytes(); card > 0) spec_->check_argument_bytes(scale_, card);
  reference_ = std::make_unique<NamedProgram>("reference", request.library);
  if (request.kernelbench_seed != 0) {
    fixed_params_ = kernelbench_param_values(request.kernelbench_model, request.kernelbench_seed, *spec_, scale_, device_.device());
  }
  // The arguments' shapes, from one set made on the device (what the arena will hold per slot).
  const auto args = make_arguments(*spec_, scale_, 1, device_.device());
  std::vector<TensorMeta> metas;
  for (const auto& a : args) metas.push_back(meta_of(a));
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) {
    // The idle probe: a spin of 100 us of the GPU's wall clock, timed from the host, so that the
    // time it waits for another context's work (the GPU time-slices between processes) is part of
    // what it sees, and an idle GPU's lower clocks are not.
    std::vector<double> samples;
    for (int i = 0; i < 11; ++i) samples.push_back(probe_once());
    std::nth_element(samples.begin(), samples.begin() + 5, samples.end());
    probe_baseline_us_ = samples[5];
  }
#endif
  std::string device_name;
#if CRL_HAVE_CUDA
  if (device_.is_cuda()) device_name = at::cuda::getCurrentDeviceProperties()->name;
#endif
  return {static_cast<int>(spec_->num_args()), metas, probe_baseline_us_, device_name, 0};
}

std::vector<at::Tensor> JudgeSession::arguments_for(uint64_t seed, bool spread, bool edges) {
  // (KernelBench's rule: every call's params hold Model's values; the inputs stay fresh per call)
  return make_call_arguments(*spec_, scale_, {seed, edges, spread}, value_mix_, device_.device(), fixed_params_);
}

void JudgeSession::make_outputs(Outputs& o, size_t* spread_inputs, std::vector<at::Tensor> args) {
  // `args`, where given, are the inputs check_inputs just made for this seed: used on the first try
  // only (a failed run may have written into them).
  int attempts = 0;
  o.tensors = reclaiming([&] {
    if (args.empty() || attempts > 0) {
      args = arguments_for(o.seed, false, o.edges);
      const size_t spread = o.spread ? spread_samples(*spec_, args) : 0;
      if (spread_inputs != nullptr) *spread_inputs = spread;
    }
    ++attempts;
    return call_and_check(device_, *reference_, args);
  });
  args.clear();
  o.deltas.clear();
  o.scales.clear();
  o.float64_missing.clear();
  if (o.float64) add_float64(o);
}

void JudgeSession::add_float64(Outputs& o) {
  if (!float64_unavailable_.empty()) {
    o.float64_missing = float64_unavailable_;
    return;
  }
  // The same inputs made again (the float32 run may have written into its own), then the reference
  // in float64 and on nudged inputs; an out-of-memory error lets the cached outputs go before each
  // smaller try.
  auto args = reclaiming([&] { return arguments_for(o.seed, o.spread, o.edges); });
  Float64Reference f = float64_reference([this](const std::vector<at::Tensor>& a) { return call_and_check(device_, *reference_, a); },
                                         *spec_, std::move(args), o.tensors, [this] { release_all_outputs(); });
  o.deltas = std::move(f.deltas);
  o.scales = std::move(f.scales);
  o.float64_missing = std::move(f.missing);
  float64_unavailable_ = o.float64_missing;
}

size_t JudgeSession::nan_count(const std::vector<at::Tensor>& outputs) const {
  // In chunks: summing a bool tensor promotes it to int64 whole, 8 bytes an element (at full scale
  // 12 GiB for ReLU's 6 GiB output: the H100 judge ran out of memory in the domain probe).
  constexpr int64_t kChunk = int64_t{1} << 26;
  size_t n = 0;
  for (const auto& t : outputs) {
    if (!at::isFloatingType(t.scalar_type())) continue;
    const at::Tensor flat = t.reshape({-1});
    for (int64_t start = 0; start < flat.numel(); start += kChunk) {
      n += static_cast<size_t>(at::isnan(flat.narrow(0, start, std::min(kChunk, flat.numel() - start))).sum().item<int64_t>());
    }
  }
  return n;
}

ValuesReply JudgeSession::on(const ValuesRequest& request) {
  if (request.eligible.size() != spec_->num_args()) {
    throw InputError(fmt::format("values: {} eligible entries for {} arguments", request.eligible.size(), spec_->num_args()));
  }
  value_mix_ = {};
  ValuesReply reply;
  // NaN in the reference's outputs with `mix` (SIZE_MAX: it failed on them, or went past the probe's runs).
  const auto nans_with = [&](const ValueMix& mix) -> size_t {
    if (reply.runs >= kMaxValueProbeRuns) return SIZE_MAX;
    ++reply.runs;
    try {
      return reclaiming([&] {
        return nan_count(call_and_check(device_, *reference_, make_call_arguments(*spec_, scale_, {request.seed}, mix, device_.device(), fixed_params_)));
      });
    } catch (const std::exception&) {
      if (device_.poisoned() || mix.kinds.empty()) throw;  // the reference fails on its own inputs: crl's failure
      return SIZE_MAX;
    }
  };
  const size_t plain = nans_with(ValueMix{});
  std::vector<std::pair<size_t, uint32_t>> items;
  for (size_t i = 0; i < request.eligible.size(); ++i) {
    for (const uint32_t bit : {kMixSigns, kMixMagnitudes, kMixConstants}) {
      if ((request.eligible[i] & bit) != 0) items.emplace_back(i, bit);
    }
  }
  std::vector<uint32_t> kept(request.eligible.size(), 0);
  // Kept together where the reference stays defined on them all; else halved until each is decided.
  std::function<void(size_t, size_t)> settle = [&](size_t begin, size_t end) {
    if (begin == end) return;
    ValueMix mix{std::vector<uint32_t>(kept.size(), 0), true};
    for (size_t k = begin; k < end; ++k) mix.kinds[items[k].first] |= items[k].second;
    if (nans_with(mix) <= plain) {
      for (size_t k = begin; k < end; ++k) kept[items[k].first] |= items[k].second;
      return;
    }
    if (end - begin == 1) {
      reply.dropped += fmt::format("{}{}: {}", reply.dropped.empty() ? "" : "; ", spec_->arg(items[begin].first).name,
                                   mix_kind_name(items[begin].second));
      return;
    }
    const size_t middle = begin + (end - begin) / 2;
    settle(begin, middle);
    settle(middle, end);
  };
  settle(0, items.size());
  if (!reply.dropped.empty()) reply.dropped += " (the reference gives NaN or fails on them)";
  value_mix_.kinds = kept;
  reply.kinds = std::move(kept);
  return reply;
}

void JudgeSession::evict_to(int64_t budget) {
  int64_t total = 0;
  for (const auto& [key, o] : outputs_) total += o.tensors.empty() ? 0 : o.bytes;
  // Least recently used first; the one just made (front) always stays.
  for (auto it = recently_used_.rbegin(); total > budget && it != recently_used_.rend(); ++it) {
    if (std::next(it) == recently_used_.rend()) break;
    Outputs& o = outputs_.at(*it);
    if (o.tensors.empty()) continue;
    total -= o.bytes;
    o.evict();
  }
}

void JudgeSession::release_all_outputs() {
  for (auto& [key, o] : outputs_) o.evict();
  device_.release_cached_memory();
}

template <typename Make>
auto JudgeSession::reclaiming(Make make) -> decltype(make()) {
  // The judge's share of GPU memory holds the cached reference outputs beside what a request makes
  // (inputs again, a reference's outputs and temporaries): at full scale that can be more than the
  // share (level1 030, 038: 6-9 GB per tensor). Cached outputs are made again from their seeds when
  // next asked for, so they are let go, with the allocator's free blocks, and the request runs once more.
  try {
    return make();
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
  }
  release_all_outputs();
  return make();
}

void JudgeSession::keep(const std::string& key, Outputs outputs) {
  outputs.bytes = bytes_of(outputs.tensors) + bytes_of(outputs.deltas) + bytes_of(outputs.scales);
  outputs_[key] = std::move(outputs);
  recently_used_.remove(key);
  recently_used_.push_front(key);
  evict_to(cache_budget_bytes_);
}

const std::vector<at::Tensor>& JudgeSession::outputs_for(const std::string& key) {
  auto it = outputs_.find(key);
  if (it == outputs_.end()) throw InputError("the judge holds no reference outputs named '" + key + "'");
  if (it->second.tensors.empty()) {
    // Evicted for memory: made again from the same seed (references are deterministic per seed).
    Outputs again = it->second;
    make_outputs(again);
    keep(key, std::move(again));
    it = outputs_.find(key);
  } else {
    recently_used_.remove(key);
    recently_used_.push_front(key);
  }
  return it->second.tensors;
}

ReferenceReply JudgeSession::on(const ReferenceRequest& request) {
  const std::string& key = request.key;
  Outputs o;
  o.seed = request.seed;
  o.spread = request.spread;
  o.edges = request.edges;
  o.float64 = request.float64;
  size_t spread_inputs = 0;
  make_outputs(o, &spread_inputs);
  std::vector<OutputMeta> metas = metas_of(o.tensors);
  std::string missing = o.float64_missing;
  keep(key, std::move(o));
  return {std::move(metas), static_cast<int64_t>(spread_inputs), std::move(missing)};
}

CallTimeReply JudgeSession::on(const CallTimeRequest& request) {
  // The reference's time per call, the fastest of a few back to back (the first ones pay for
  // allocations and warm-up): the evaluator sizes its timed batches by it, so that a request's
  // fixed cost is a small part of what is timed. Outputs are dropped at once (the allocator's
  // cache then serves the next call, as in a timed batch).
  // On the GPU it also measures what a call allocates beyond its arguments, at its peak (the
  // evaluator sizes the processes' shares of the card by it: eval/memory_plan.h).
  const int repeats = std::clamp(request.repeats, 1, 100);
  int64_t peak_bytes = 0;
  const double best_us = reclaiming([&] {
    const auto args = arguments_for(request.seed, false, false);
    device_.synchronize();
    const int64_t before = device_.allocated_bytes();
    device_.reset_peak();
    double best = 0;
    for (int i = 0; i < repeats; ++i) {
      device_.synchronize();
      const auto start = std::chrono::steady_clock::now();
      (void)call_and_check(device_, *reference_, args);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      if (i == 0 || us < best) best = us;
    }
    peak_bytes = std::max<int64_t>(device_.peak_allocated_bytes() - before, 0);
    return best;
  });
  return {best_us, peak_bytes, device_.card_bytes()};
}

BatchCopyReply JudgeSession::on(const BatchCopyRequest& request) {
  const auto& outs = outputs_for(request.key);
  std::vector<ProgramOutput> outputs;
  for (const auto& t : outs) outputs.push_back({t, t.is_cuda() ? "cuda" : "cpu"});
  const auto tol = [this](at::ScalarType dtype) {
    const crl::Tolerance t = spec_->tolerance_for(dtype);
    return Tolerance{t.atol, t.rtol};
  };
  return {reclaiming([&] { return batch_copy_would_pass(outputs, tol); })};
}

ArenaReply JudgeSession::on(const ArenaRequest& request) {
  layout_ = request.layout;
  if (device_.device().is_cuda()) {
    // The workers make their own arenas (InputArena); adopt_arena maps each here.
    arena_.release();
    reference_arena_.release();
    return {};
  }
  arena_.map_shared(layout_, kArenaFd);
  reference_arena_.map_shared(layout_, kReferenceArenaFd);
  // The staging arena where the evaluator gave one (every evaluation does; a test's judge may not):
  // a sealed memfd at its fd number, never a file a library opened there meanwhile.
  const int seals = fcntl(kStagingArenaFd, F_GET_SEALS);
  if (seals != -1 && (seals & F_SEAL_SHRINK) != 0) staging_arena_.map_shared(layout_, kStagingArenaFd);
  const uint64_t region = request.output_region_bytes;
  if (region != output_region_bytes_) {
    unmap_shared_memory(output_region_, output_region_bytes_);
    output_region_ = map_shared_memory(kOutputRegionFd, region, "the candidate output region");
    output_region_bytes_ = region;
  }
  return {};
}

InputArena& JudgeSession::arena_named(ArenaOwner which) { return which == ArenaOwner::candidate ? arena_ : reference_arena_; }

AdoptArenaReply JudgeSession::on(const AdoptArenaRequest& request) {
  // A worker's own arena, by the IPC handle its "arena" reply gave. The handle is the worker's word
  // (a candidate's code runs there): one that does not open, is too small or opens the other
  // program's arena is refused as the worker's failure, not the judge's.
  if (!device_.is_cuda()) throw InputError("adopt_arena is for the GPU backend (the CPU's arenas are the evaluator's memfds)");
  InputArena& arena = arena_named(request.which);
  const InputArena& other = &arena == &arena_ ? reference_arena_ : arena_;
  try {
    arena.import(layout_, device_.device(), request.ipc_handle, &other);
  } catch (const InputError& e) {
    return {false, e.what()};
  }
  return {true, ""};
}

NoReply JudgeSession::on(const FillRequest& request) {
  // Timed inputs go to both arenas: each program of a pair gets its own copy of the same values.
  const bool both = request.both;
  if (request.staged && !staging_arena_.ready()) throw InputError("a staged fill, but this judge has no staging arena");
  std::vector<InputArena*> targets{&arena_, both ? &reference_arena_ : nullptr};
  if (request.staged) targets = {&staging_arena_};
  for (const SlotFill& item : request.slots) {
    const int slot = item.slot;
    const auto args = reclaiming([&] { return arguments_for(item.seed, item.spread, item.edges); });
    for (InputArena* arena : targets) {
      if (arena == nullptr) continue;
      auto slot_args = arena->arguments(slot);
      for (size_t i = 0; i < args.size(); ++i) slot_args[i].copy_(args[i]);
    }
  }
  device_.check("filling the inputs");
  return {};
}

NoReply JudgeSession::on(const ReferenceSlotRequest& request) {
  // The reference's outputs for one slot of the last timed batch, filed as batch:<slot> for the
  // comparison with the candidate's. Its inputs are the ones check_inputs just made again from the
  // slot's seed when it kept them (dropped after: the reference may write into them), else made here.
  Outputs o;
  o.seed = request.seed;
  o.float64 = request.float64;
  std::vector<at::Tensor> args;
  if (kept_inputs_ && kept_inputs_->seed == o.seed) args = std::move(kept_inputs_->tensors);
  kept_inputs_.reset();
  make_outputs(o, nullptr, std::move(args));
  keep(fmt::format("batch:{}", request.slot), std::move(o));
  return {};
}

CompareReply JudgeSession::on(const CompareRequest& request) {
  const auto& ref_outputs = outputs_for(request.key);
  const auto& deltas = outputs_.at(request.key).deltas;
  const auto& scales = outputs_.at(request.key).scales;
  const auto& refs = request.outputs;
  std::vector<ProgramOutput> reference_outputs;
  std::vector<ProgramOutput> candidate_outputs;
  for (size_t i = 0; i < ref_outputs.size(); ++i) {
    const at::Tensor& t = ref_outputs[i];
    reference_outputs.push_back(
        {t, t.is_cuda() ? "cuda" : "cpu", i < deltas.size() ? deltas[i] : at::Tensor(), i < scales.size() ? scales[i] : at::Tensor()});
  }
  // Shapes, dtypes and devices first: nothing of a candidate is read before they agree.
  std::string shape_problem;
  if (refs.size() != ref_outputs.size()) {
    shape_problem = fmt::format("returned {} outputs, the reference returns {}", refs.size(), ref_outputs.size());
  }
  for (size_t i = 0; shape_problem.empty() && i < refs.size(); ++i) {
    const auto want = meta_of(ref_outputs[i]);
    const std::string want_device = ref_outputs[i].is_cuda() ? "cuda" : "cpu";
    if (!(refs[i].meta == want) || refs[i].device != want_device) {
      shape_problem = fmt::format("output {}: shape and dtype {} on {}, but the reference's are {} on {}", i, describe(refs[i].meta),
                                  refs[i].device, describe(want), want_device);
    }
  }
  // ("match", not "ok": every reply's "ok" says whether the request itself succeeded.)
  if (!shape_problem.empty()) return {false, shape_problem, 0, -1};
  uint64_t region_used = 0;
  for (size_t i = 0; i < refs.size(); ++i) {
    at::Tensor values;
    if (refs[i].device == "cuda") {
      values = importer_.import(refs[i], device_.device().index());
    } else {
      // The evaluator copied this output into the region, at the offset now in `address`.
      const uint64_t bytes = static_cast<uint64_t>(refs[i].meta.nbytes());
      if (refs[i].address > output_region_bytes_ || bytes > output_region_bytes_ - refs[i].address) {
        throw InputError("a CPU output lies outside the output region");
      }
      values = at::from_blob(static_cast<char*>(output_region_) + refs[i].address, refs[i].meta.sizes,
                             at::TensorOptions().dtype(refs[i].meta.dtype));
      region_used += bytes;
    }
    candidate_outputs.push_back({values, refs[i].device});
  }
  const auto tol = [this](at::ScalarType dtype) {
    const crl::Tolerance t = spec_->tolerance_for(dtype);
    return Tolerance{t.atol, t.rtol};
  };
  // (its float64 temporaries, ~1.5 GB a chunk, may need the cached outputs' memory: the tensors
  // compared stay alive through their handles here)
  const ComparisonResult cmp = reclaiming([&] { return compare_outputs(reference_outputs, candidate_outputs, tol); });
  device_.check("comparing outputs");
  (void)region_used;
  return {cmp.ok, cmp.message, cmp.max_abs_error, cmp.precision_ratio};
}

CheckInputsReply JudgeSession::on(const CheckInputsRequest& request) {
  const auto expected = reclaiming([&] { return arguments_for(request.seed, request.spread, request.edges); });
  const auto seen = arena_.arguments(request.slot);
  std::vector<int64_t> changed;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!reclaiming([&] { return same_bytes(expected[i], seen[i]); })) changed.push_back(static_cast<int64_t>(i));
  }
  device_.check("checking the candidate's inputs");
  kept_inputs_.reset();
  if (request.keep && !request.spread && !request.edges) kept_inputs_ = KeptInputs{request.seed, expected};
  return {changed};
}

NoReply JudgeSession::on(const FlushRequest&) {
  // Before each timed batch: the judge just wrote the inputs, so its own core's caches (CPU) or the
  // GPU's L2 hold them; a buffer of twice that cache written now leaves both programs' batches to
  // start from the same, shared level (the last-level cache, or memory), wherever they run.
  if (!flush_buffer_.defined()) {
    int64_t bytes = 0;
#if CRL_HAVE_CUDA
    if (device_.is_cuda()) {
      int l2 = 0;
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
      bytes = 2ll * std::max(l2, 1 << 20);
    }
#endif
    if (device_.device().is_cpu()) bytes = 2ll * std::max<long>(sysconf(_SC_LEVEL2_CACHE_SIZE), 1l << 20);
    flush_buffer_ = reclaiming([&] { return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(device_.device())); });
  }
  flush_buffer_.fill_(static_cast<int>(++flush_counter_ & 0x7f));
  device_.synchronize();
  return {};
}

double JudgeSession::probe_once() {
#if CRL_HAVE_CUDA
  const auto stream = at::cuda::getCurrentCUDAStream();
  cudaStreamSynchronize(stream);
  const auto start = Clock::now();
  spin_wall_clock(kProbeNanoseconds, stream);
  cudaStreamSynchronize(stream);
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
#else
  return 0;
#endif
}

ProbeReply JudgeSession::on(const ProbeRequest& request) {
  if (!device_.is_cuda()) return ProbeReply{};
  const double slack_us = request.slack_us;
  // The first probe after another process used the GPU pays for the switch between their contexts
  // (about 150 us on the H200) even when that process left nothing running; the second one is
  // slow only while the other context still has work, which keeps the GPU time-slicing.
  // A single slow probe is not enough: on the H200 about one in a few hundred is delayed by
  // ~300 us with nothing else running (seen with every other process frozen), so busy means two
  // slow probes in a row after the first.
  const double first_us = probe_once();
  const double limit_us = probe_baseline_us_ * 1.5 + slack_us;
  const double second_us = probe_once();
  double us = second_us;
  int retries = 0;
  if (us > limit_us) {
    retries = 1;
    const double again_us = probe_once();
    us = again_us <= limit_us ? again_us : std::max(second_us, again_us);
  }
  return {us <= limit_us, us, first_us, second_us, retries, probe_baseline_us_};
}

NoReply JudgeSession::on(const ReleaseRequest&) {
  // The candidate's outputs and, on the GPU, its arena (the worker's own memory) are let go before
  // its worker ends: CUDA leaves undefined what a mapping of freed memory does.
  importer_.close_all();
  if (device_.is_cuda()) arena_.release();
  kept_inputs_.reset();
  for (auto it = outputs_.begin(); it != outputs_.end();) {
    if (it->first.rfind("batch:", 0) == 0) {
      recently_used_.remove(it->first);
      it = outputs_.erase(it);
    } else {
      ++it;
    }
  }
  return {};
}

}  // namespace crl::worker
