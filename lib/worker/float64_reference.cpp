// The reference's float64 outputs as the float32 reference's error against them (float64_reference.h).
#include "worker/float64_reference.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "program/arguments.h"
#include "worker/worker_device.h"

namespace crl::worker {
namespace {

constexpr int64_t kDeltaChunkElements = int64_t{1} << 22;
constexpr uint64_t kNudgeSeed = 0x6e75646765ULL;  // "nudge": not secret, only fixed

std::string first_line(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

// The errors of every float32 output; nullopt and `why` when an output is not float64 in the
// float64 run (the reference fixes its dtype) or the count or shapes differ.
std::optional<std::vector<at::Tensor>> deltas_of(const std::vector<at::Tensor>& out64, const std::vector<at::Tensor>& r32, std::string* why) {
  if (out64.size() != r32.size()) {
    *why = fmt::format("the reference returns {} outputs in float64, {} in float32", out64.size(), r32.size());
    return std::nullopt;
  }
  std::vector<at::Tensor> deltas(r32.size());
  for (size_t i = 0; i < r32.size(); ++i) {
    if (r32[i].scalar_type() != at::kFloat) continue;
    if (out64[i].scalar_type() != at::kDouble || out64[i].sizes() != r32[i].sizes()) {
      *why = fmt::format("output {} is {} in the float64 run (the reference fixes its dtype or shape)", i, c10::toString(out64[i].scalar_type()));
      return std::nullopt;
    }
    deltas[i] = float64_delta(out64[i], r32[i]);
  }
  return deltas;
}

// The batch size every output has along dim 0, where some input has it too, or 0: then the
// outputs cannot be made in chunks of samples. (Inputs of that size along dim 0 are sliced, the
// others kept whole, as a matrix product's second operand; the result is checked afterwards.)
int64_t common_batch(const TaskSpec& spec, const std::vector<at::Tensor>& args, const std::vector<at::Tensor>& r32) {
  if (r32.empty() || r32[0].dim() < 1) return 0;
  const int64_t batch = r32[0].size(0);
  for (const auto& o : r32) {
    if (o.dim() < 1 || o.size(0) != batch) return 0;
  }
  bool sliced = false;
  for (size_t i = 0; i < spec.inputs.size() && i < args.size(); ++i) sliced |= args[i].dim() >= 1 && args[i].size(0) == batch;
  return batch >= 2 && sliced ? batch : 0;
}

bool sliced_input(const at::Tensor& a, int64_t batch) { return a.dim() >= 1 && a.size(0) == batch; }

at::Tensor to_double(const at::Tensor& a) { return at::isFloatingType(a.scalar_type()) ? a.to(at::kDouble) : a; }

// The float64 outputs in chunks of `chunk` samples, joined along dim 0 (nullopt: out of memory). The
// inputs are converted a chunk at a time (a whole float64 copy may be what did not fit), the params once.
std::optional<std::vector<at::Tensor>> run_in_chunks(const ProgramRun& run, size_t num_inputs, const std::vector<at::Tensor>& args,
                                                     int64_t batch, int64_t chunk, int* runs) {
  std::vector<std::vector<at::Tensor>> parts;
  try {
    std::vector<at::Tensor> slice(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      if (i >= num_inputs || !sliced_input(args[i], batch)) slice[i] = to_double(args[i]);
    }
    for (int64_t start = 0; start < batch; start += chunk) {
      for (size_t i = 0; i < num_inputs; ++i) {
        if (sliced_input(args[i], batch)) slice[i] = to_double(args[i].narrow(0, start, std::min(chunk, batch - start))).contiguous();
      }
      parts.push_back(run(slice));
      ++*runs;
    }
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    return std::nullopt;
  }
  std::vector<at::Tensor> joined;
  for (size_t o = 0; o < parts.front().size(); ++o) {
    std::vector<at::Tensor> pieces;
    for (const auto& p : parts) pieces.push_back(p.at(o));
    joined.push_back(at::cat(pieces, 0));
  }
  return joined;
}

// After the whole run ran out of memory: chunks of half the batch, then a quarter ..., kept only where
// they agree with the float32 reference, summed over each output, to 1e-3 of its size (outputs of a
// batch statistic, a batch norm in training mode, made a chunk at a time differ by percents; rounding
// by far less, even where the values mixed into the call make sums cancel).
Float64Reference chunked(const ProgramRun& run, const TaskSpec& spec, const std::vector<at::Tensor>& args, const std::vector<at::Tensor>& r32,
                      const std::function<void()>& release_memory, int runs) {
  Float64Reference result;
  result.runs = runs;
  const int64_t batch = common_batch(spec, args, r32);
  if (batch == 0) {
    result.missing = "the float64 run does not fit the judge's memory, and the outputs are not per sample";
    return result;
  }
  for (int64_t chunk = batch / 2; chunk >= 1; chunk /= 2) {
    release_memory();
    auto out64 = run_in_chunks(run, spec.inputs.size(), args, batch, chunk, &result.runs);
    if (!out64) continue;
    std::string why;
    auto deltas = deltas_of(*out64, r32, &why);
    if (!deltas) {
      result.missing = why;
      return result;
    }
    for (size_t i = 0; i < r32.size(); ++i) {
      if (!(*deltas)[i].defined()) continue;
      const Tolerance tol = spec.tolerance_for(at::kFloat);
      const at::Tensor finite = at::isfinite(r32[i]);
      const double apart = (*deltas)[i].to(at::kDouble).abs().sum().item<double>();
      const double size = at::where(finite, r32[i].to(at::kDouble).abs(), 0.0).sum().item<double>();
      if (apart > 1e-3 * size + tol.atol * static_cast<double>(r32[i].numel())) {
        result.missing = fmt::format("the float64 run fits the judge's memory only in chunks of {} samples, and output {} then differs "
                                     "from the float32 reference by {:.2g} of its size (its samples are not independent)", chunk, i,
                                     size > 0 ? apart / size : apart);
        return result;
      }
    }
    result.deltas = std::move(*deltas);
    return result;
  }
  result.missing = "the float64 run does not fit the judge's memory, not even one sample at a time";
  return result;
}

// Each float32 output's error scale: |delta| plus how far the nudged run moved it (in chunks).
std::vector<at::Tensor> scales_of(const std::vector<at::Tensor>& deltas, const std::vector<at::Tensor>& r32, const std::vector<at::Tensor>& nudged) {
  std::vector<at::Tensor> scales(r32.size());
  for (size_t i = 0; i < r32.size(); ++i) {
    if (!deltas[i].defined()) continue;
    at::Tensor scale = at::empty(r32[i].sizes(), r32[i].options().dtype(at::kBFloat16));
    const at::Tensor r = r32[i].contiguous().view({-1}), n = nudged.at(i).contiguous().view({-1}), d = deltas[i].view({-1});
    at::Tensor out = scale.view({-1});
    for (int64_t start = 0; start < out.numel(); start += kDeltaChunkElements) {
      const int64_t k = std::min(kDeltaChunkElements, out.numel() - start);
      const at::Tensor moved = (n.narrow(0, start, k) - r.narrow(0, start, k)).abs();
      const at::Tensor finite_moved = at::where(at::isfinite(moved), moved, at::zeros_like(moved));
      out.narrow(0, start, k).copy_(d.narrow(0, start, k).to(at::kFloat).abs() + finite_moved);
    }
    scales[i] = scale;
  }
  return scales;
}

}  // namespace

void nudge_arguments(std::vector<at::Tensor>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    at::Tensor& a = args[i];
    const at::ScalarType t = a.scalar_type();
    if (!at::isFloatingType(t) || a.numel() == 0) continue;
    const double eps = t == at::kFloat ? 0x1p-23 : t == at::kHalf ? 0x1p-10 : t == at::kBFloat16 ? 0x1p-7 : 0x1p-52;
    at::Generator gen = make_argument_generator(a.device(), kNudgeSeed + i);
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(a.device());
    at::Tensor flat = a.view({-1});
    for (int64_t start = 0; start < flat.numel(); start += kDeltaChunkElements) {
      const int64_t n = std::min(kDeltaChunkElements, flat.numel() - start);
      const at::Tensor pick = at::empty({n}, f32).uniform_(0, 1, gen);
      const at::Tensor factor = at::where(pick < 0.25, 1.0 - eps, at::where(pick < 0.5, 1.0 + eps, at::ones_like(pick)));
      at::Tensor chunk = flat.narrow(0, start, n);
      chunk.copy_(chunk.to(at::kDouble) * factor.to(at::kDouble));
    }
  }
}

at::Tensor float64_delta(const at::Tensor& o64, const at::Tensor& r32) {
  at::Tensor delta = at::empty(r32.sizes(), r32.options().dtype(at::kBFloat16));
  const at::Tensor a = o64.contiguous().view({-1}), b = r32.contiguous().view({-1});
  at::Tensor d = delta.view({-1});
  for (int64_t start = 0; start < d.numel(); start += kDeltaChunkElements) {
    const int64_t n = std::min(kDeltaChunkElements, d.numel() - start);
    const at::Tensor x = a.narrow(0, start, n), r = b.narrow(0, start, n).to(at::kDouble);
    const at::Tensor diff = x - r;
    d.narrow(0, start, n).copy_(at::where(at::isfinite(x) & at::isfinite(r), diff, at::zeros_like(diff)));
  }
  return delta;
}

Float64Reference float64_reference(const ProgramRun& run, const TaskSpec& spec, std::vector<at::Tensor> args,
                                   const std::vector<at::Tensor>& r32, const std::function<void()>& release_memory) {
  Float64Reference result;
  try {
    result.runs = 1;
    std::vector<at::Tensor> args64;
    for (const auto& a : args) args64.push_back(to_double(a));
    const auto out64 = run(args64);
    auto deltas = deltas_of(out64, r32, &result.missing);
    if (deltas) result.deltas = std::move(*deltas);
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) {
      result.missing = "the reference does not run in float64: " + first_line(e.what());
      result.deltas.assign(r32.size(), at::Tensor());
      return result;
    }
    try {
      result = chunked(run, spec, args, r32, release_memory, result.runs);
    } catch (const std::exception& again) {
      result.missing = "the reference does not run in float64 in chunks of samples: " + first_line(again.what());
    }
  }
  if (result.missing.empty()) {
    // The nudged float32 run (it fits where the float32 one did; an out-of-memory error here is the
    // judge's, as for that one).
    nudge_arguments(args);
    std::vector<at::Tensor> nudged = run(args);
    args.clear();
    if (nudged.size() != r32.size()) throw Error("the reference returned another number of outputs on nudged arguments");
    result.scales = scales_of(result.deltas, r32, nudged);
  }
  if (!result.missing.empty()) {
    result.deltas.assign(r32.size(), at::Tensor());
    result.scales.assign(r32.size(), at::Tensor());
  }
  return result;
}

}  // namespace crl::worker
