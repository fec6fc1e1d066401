// The values every call's arguments mix in beyond what the spec's init draws: signs and magnitudes
// the init never draws, the declared edges, and constant tensors (ones, zeros) drawn at random.
// Every trial and every timed call is made the same way, so a program cannot tell the calls that
// test these values from the rest: it must be right on all of them (docs/evaluation.md, "The
// precision contract").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl {

// What may be mixed into one argument: bits of ValueMix::kinds.
enum MixKind : uint32_t {
  // Each element's sign flipped with probability 1/2: for inits that draw one sign or an asymmetric
  // range (rand, uniform(0, 1), a shifted normal). Sums of such values then cancel, and rounding
  // that large positive sums hide (TF32, fp16: 7.8-10.2x on the H100, issue 40) shows.
  kMixSigns = 1,
  // A share of the elements (drawn per call) scaled by 2^e, |e| in [4, 10], both ways: magnitudes
  // the init never draws (a formula valid only on [0, 1), an fp16 intermediate that overflows).
  kMixMagnitudes = 2,
  // A constant init (ones, zeros, full) drawn at random instead, in half the calls: a program that
  // hard-codes a parameter it never reads is wrong there.
  kMixConstants = 4,
};

// Per argument of forward (inputs, then params), the MixKind bits it takes. Empty: nothing is
// mixed in (the tensors are make_arguments'), as before the judge decided.
struct ValueMix {
  std::vector<uint32_t> kinds;
  // The judge's domain probe: every argument takes its kinds at kProbeShare, and its constants are
  // always drawn (so that one run shows whether the reference is defined on them).
  bool probing = false;
  bool operator==(const ValueMix&) const = default;
};

// The share of elements moved to magnitudes and declared edges in a call, log-uniform in
// [kMixShareMin, kMixShareMax] and drawn per tensor and call: a program that samples a few values to
// decide whether a call is "an edge trial" misses them in most calls and is wrong there.
inline constexpr double kMixShareMin = 1.0 / 4096;
inline constexpr double kMixShareMax = 1.0 / 8;
inline constexpr double kProbeShare = 0.25;

// What the spec allows before the judge's domain probe: floating tensors, not marked `mixed: false`
// and without a post op whose structure the reference relies on (tril, triu, symmetric, softmax):
// signs for continuous inits that are not symmetric about 0, magnitudes for every continuous init,
// constants for ones, zeros and full.
ValueMix eligible_mix(const TaskSpec& spec);

// One call's arguments as drawn from its seed: `dense_edges` for an edge trial (half the elements of
// every tensor with declared edges or magnitudes moved there, program/edge_inputs.h), `spread` for
// the per-sample guard (samples scaled apart afterwards).
struct CallValues {
  uint64_t seed = 0;
  bool dense_edges = false;
  bool spread = false;
};

// forward's arguments for one call: make_arguments(spec, scale, seed, device), then each argument's
// mix (its MixKind bits; constants first, then signs, then a share of its elements moved to its
// declared edges and magnitudes), then spread_samples where asked. Deterministic for a (call, mix,
// device type); the judge and the candidate's worker (the guards' own inputs) make the same tensors.
// Temporaries are bounded by chunks of kEdgeChunkElements, whatever a tensor's size. Under
// KernelBench's rule the params then hold `fixed`'s values (apply_fixed_params; empty: crl's rule).
std::vector<at::Tensor> make_call_arguments(const TaskSpec& spec, const std::string& scale, const CallValues& call,
                                            const ValueMix& mix, const at::Device& device, const FixedParams& fixed = {});
// The same values written into `args` (contiguous tensors of the arguments' shapes and dtypes), in
// place: the guards' new values at the same addresses, without a second set of inputs.
void fill_call_arguments(const TaskSpec& spec, const std::string& scale, const CallValues& call, const ValueMix& mix,
                         std::vector<at::Tensor>& args, const FixedParams& fixed = {});

// "x: signs, magnitudes; weight: constants" (the judge step's words); "nothing" when empty.
std::string describe_mix(const TaskSpec& spec, const ValueMix& mix);

}  // namespace crl
