// One call's arguments with the task's value mix (value_mix.h).
#include "program/value_mix.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/statistics.h"
#include "program/arguments.h"
#include "program/edge_inputs.h"

namespace crl {
namespace {

// Separate the mix's streams from the tensor's own values and from its edges (same seed).
constexpr uint64_t kMixStreamTag = 0x6d69786564ULL;  // "mixed"
constexpr uint64_t kMixDrawTag = 0x647261777301ULL;  // the per-call scalars, drawn on the host

bool continuous(InitKind k) {
  return k == InitKind::randn || k == InitKind::rand || k == InitKind::uniform || k == InitKind::normal ||
         k == InitKind::uniform_fan_in;
}

bool constant(InitKind k) { return k == InitKind::ones || k == InitKind::zeros || k == InitKind::full; }

bool structured(const TensorSpec& t) {
  return std::any_of(t.post.begin(), t.post.end(), [](const PostOp& op) {
    return op.kind == PostKind::tril || op.kind == PostKind::triu || op.kind == PostKind::symmetric || op.kind == PostKind::softmax;
  });
}

// Whether the init draws values symmetric about 0 (flipping signs would change nothing): randn,
// uniform_fan_in, normal(0, s) and uniform(-a, a), with no post op.
bool symmetric_init(const TensorSpec& t, const ScaleVariables& vars) {
  if (!t.post.empty()) return false;
  switch (t.init.kind) {
    case InitKind::randn:
    case InitKind::uniform_fan_in: return true;
    case InitKind::normal: return t.init.args.at(0).evaluate(vars) == 0;
    case InitKind::uniform: return t.init.args.at(0).evaluate(vars) == -t.init.args.at(1).evaluate(vars);
    default: return false;
  }
}

// Per-call scalars of a tensor, from its stream seed on the host (the same on every device and with
// no device round trip): the share of its elements moved, how its count rounds, and whether its
// constant is drawn.
struct CallDraws {
  double share = 0;
  double count_draw = 0;
  bool draw_constant = false;
};
CallDraws call_draws(uint64_t stream_seed) {
  const uint64_t h = mix64(stream_seed ^ kMixDrawTag), g = mix64(h);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return {kMixShareMin * std::pow(kMixShareMax / kMixShareMin, u), static_cast<double>(g >> 11) * 0x1.0p-53, (h & 1) != 0};
}

// ones -> uniform(0.5, 1.5), zeros and full(0) -> uniform(-0.5, 0.5), full(v) -> v * uniform(0.5, 1.5):
// the same sign as the constant (a variance stays positive), values a program must read.
void draw_constant(const TensorSpec& t, const ScaleVariables& vars, at::Generator& gen, at::Tensor& values) {
  double v = t.init.kind == InitKind::ones ? 1.0 : 0.0;
  if (t.init.kind == InitKind::full) v = t.init.args.at(0).evaluate(vars);
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(values.device());
  at::Tensor flat = values.view({-1});
  for (int64_t start = 0; start < flat.numel(); start += kEdgeChunkElements) {
    const int64_t n = std::min(kEdgeChunkElements, flat.numel() - start);
    at::Tensor drawn = v == 0 ? at::empty({n}, f32).uniform_(-0.5, 0.5, gen) : at::empty({n}, f32).uniform_(0.5, 1.5, gen).mul_(v);
    flat.narrow(0, start, n).copy_(drawn);
  }
}

// Each element's sign flipped by a fair coin. On the CPU the coin is a bit of a hash of the
// element's place and the tensor's stream, in one pass (drawing a tensor of coins with bernoulli_ cost three times the
// tensor's own fill, and a bit of the value is no coin: rand's values below 1/2 have a zero lowest
// bit); on the GPU, where drawing is cheap beside the memory traffic, drawn coins in chunks.
void flip_signs(at::Tensor& values, uint64_t stream_seed) {
  const uint64_t key = mix64(stream_seed ^ kMixStreamTag);
  if (values.device().is_cpu()) {
    // The sign bit toggled without a branch (a branch on a coin mispredicts half the time: it made
    // this loop three times slower than the fill it follows), 64 coins from one hash.
    const auto toggle = [&](auto* bits) {
      using Word = std::remove_pointer_t<decltype(bits)>;
      constexpr int kSignBit = 8 * sizeof(Word) - 1;
      at::parallel_for(0, values.numel(), int64_t{1} << 16, [&](int64_t begin, int64_t end) {
        uint64_t coins = mix64(key + static_cast<uint64_t>(begin >> 6));
        for (int64_t i = begin; i < end; ++i) {
          if ((i & 63) == 0) coins = mix64(key + static_cast<uint64_t>(i >> 6));
          bits[i] ^= static_cast<Word>(static_cast<Word>((coins >> (i & 63)) & 1) << kSignBit);
        }
      });
    };
    switch (values.element_size()) {
      case 2: toggle(static_cast<uint16_t*>(values.data_ptr())); break;
      case 4: toggle(static_cast<uint32_t*>(values.data_ptr())); break;
      case 8: toggle(static_cast<uint64_t*>(values.data_ptr())); break;
      default: throw Error(fmt::format("flip_signs: elements of {} bytes", values.element_size()));
    }
    return;
  }
  at::Generator gen = make_argument_generator(values.device(), key);
  const auto f32 = at::TensorOptions().dtype(at::kFloat).device(values.device());
  at::Tensor flat = values.view({-1});
  for (int64_t start = 0; start < flat.numel(); start += kEdgeChunkElements) {
    const int64_t n = std::min(kEdgeChunkElements, flat.numel() - start);
    const at::Tensor sign = at::empty({n}, f32).bernoulli_(0.5, gen).mul_(-2).add_(1);  // -1 or +1
    flat.narrow(0, start, n).mul_(sign.to(values.scalar_type()));
  }
}

// `sprinkle`: the tensor's declared edges take part in an ordinary call's share too.
void mix_argument(const TaskSpec& spec, const TensorSpec& t, const std::string& scale, uint64_t stream_seed, uint32_t kinds,
                  const CallValues& call, bool probing, bool sprinkle, at::Tensor& values) {
  if (values.numel() == 0) return;
  const CallDraws draws = call_draws(stream_seed);
  if ((kinds & kMixConstants) != 0 && (probing || draws.draw_constant)) {
    at::Generator gen = make_argument_generator(values.device(), mix64(stream_seed ^ kMixDrawTag ^ kMixStreamTag));
    draw_constant(t, spec.scale_variables(scale), gen, values);
  }
  if ((kinds & kMixSigns) != 0) flip_signs(values, stream_seed);
  const bool magnitudes = (kinds & kMixMagnitudes) != 0;
  if (call.dense_edges) {
    apply_edges(spec, t, scale, stream_seed, values, kEdgeFraction, magnitudes);
  } else if (magnitudes || sprinkle) {
    sprinkle_edges(spec, t, scale, stream_seed, values, probing ? kProbeShare : draws.share, draws.count_draw, sprinkle, magnitudes);
  }
}

// Every argument's mix, then spread_samples where asked, in place.
void mix_call_arguments(const TaskSpec& spec, const std::string& scale, const CallValues& call, const ValueMix& mix,
                        std::vector<at::Tensor>& args) {
  if (!mix.kinds.empty() && mix.kinds.size() != spec.num_args()) {
    throw InputError(fmt::format("a value mix of {} arguments for task {}, which has {}", mix.kinds.size(), spec.id, spec.num_args()));
  }
  const bool mixing = !mix.kinds.empty();
  for (size_t i = 0; i < args.size(); ++i) {
    const uint32_t kinds = mixing ? mix.kinds[i] : 0;
    const TensorSpec& t = spec.arg(i);
    // Declared edges follow `mixed` too: a tensor that opted out keeps them for its edge trials only.
    const bool sprinkle = mixing && t.mixed && !t.edges.empty();
    const bool dense = call.dense_edges && (!t.edges.empty() || (kinds & kMixMagnitudes) != 0);
    if (kinds == 0 && !sprinkle && !dense) continue;  // the tensor as its init made it
    mix_argument(spec, t, scale, argument_stream_seed(spec, call.seed, i), kinds, call, mix.probing, sprinkle, args[i]);
  }
  if (call.spread) spread_samples(spec, args);
}

}  // namespace

ValueMix eligible_mix(const TaskSpec& spec) {
  ValueMix mix;
  const ScaleVariables* vars = spec.scales.empty() ? nullptr : &spec.scales.begin()->second;
  for (size_t i = 0; i < spec.num_args(); ++i) {
    const TensorSpec& t = spec.arg(i);
    uint32_t kinds = 0;
    if (t.mixed && at::isFloatingType(t.dtype) && !structured(t)) {
      if (continuous(t.init.kind)) {
        kinds |= kMixMagnitudes;
        // Symmetry does not depend on the scale for the suite's inits; the first scale decides.
        if (vars == nullptr || !symmetric_init(t, *vars)) kinds |= kMixSigns;
      }
      if (constant(t.init.kind)) kinds |= kMixConstants;
    }
    mix.kinds.push_back(kinds);
  }
  return mix;
}

std::vector<at::Tensor> make_call_arguments(const TaskSpec& spec, const std::string& scale, const CallValues& call,
                                            const ValueMix& mix, const at::Device& device, const FixedParams& fixed) {
  std::vector<at::Tensor> args = make_arguments(spec, scale, call.seed, device);
  mix_call_arguments(spec, scale, call, mix, args);
  apply_fixed_params(spec, fixed, args);
  return args;
}

void fill_call_arguments(const TaskSpec& spec, const std::string& scale, const CallValues& call, const ValueMix& mix,
                         std::vector<at::Tensor>& args, const FixedParams& fixed) {
  fill_arguments(spec, scale, call.seed, args);
  mix_call_arguments(spec, scale, call, mix, args);
  apply_fixed_params(spec, fixed, args);
}

std::string describe_mix(const TaskSpec& spec, const ValueMix& mix) {
  std::string out;
  for (size_t i = 0; i < mix.kinds.size() && i < spec.num_args(); ++i) {
    const uint32_t k = mix.kinds[i];
    if (k == 0) continue;
    std::vector<std::string> words;
    if ((k & kMixSigns) != 0) words.push_back("signs");
    if ((k & kMixMagnitudes) != 0) words.push_back("magnitudes");
    if ((k & kMixConstants) != 0) words.push_back("constants drawn");
    out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", spec.arg(i).name, fmt::join(words, ", "));
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace crl
