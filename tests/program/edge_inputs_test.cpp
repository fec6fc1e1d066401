// Tests of edge trials on the CPU: the `edges` syntax, determinism, that the declared edges are
// produced, and that a candidate dropping a seldom-acting clamp passes spec inputs but not edge ones.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "program/arguments.h"
#include "program/edge_inputs.h"

namespace crl {
namespace {

const at::Device kCpu(at::kCPU);

TaskSpec spec_from(const std::string& tensors, const std::string& scale = "{n: 256, m: 512}") {
  const std::string text = "task: level1/001_t\ncategory: test\n" + tensors + "scales:\n  small: " + scale +
                           "\nflops: 1\nbytes: 1\n";
  return parse_task_spec({true, text, 1}, "t.crl");
}

std::string bad_spec_message(const std::string& tensors) {
  try {
    spec_from(tensors);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The fraction of elements of `t` within `eps` of `v`.
double fraction_near(const at::Tensor& t, double v, double eps) {
  return (t.to(at::kDouble) - v).abs().le(eps).to(at::kDouble).mean().item<double>();
}

TEST(EdgeInputs, ParsesEdgesWithExpressions) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: x, shape: [n, m], dtype: float32, edges: [around(-1), 'around(m // 256)', zeros, large(100), signs]}\n"
      "  - {name: y, shape: [n], dtype: float32}\n"
      "params:\n"
      "  - {name: b, shape: [m], dtype: float16, init: rand, edges: [signs]}\n");
  ASSERT_EQ(spec.inputs[0].edges.size(), 5u);
  EXPECT_EQ(spec.inputs[0].edges[0].kind, EdgeKind::around);
  EXPECT_EQ(spec.inputs[0].edges[1].text, "around(m // 256)");
  EXPECT_DOUBLE_EQ(spec.inputs[0].edges[1].args[0].evaluate(spec.scale_variables("small")), 2.0);
  EXPECT_EQ(spec.inputs[0].edges[2].kind, EdgeKind::zeros);
  EXPECT_EQ(spec.inputs[0].edges[3].kind, EdgeKind::large);
  EXPECT_EQ(spec.inputs[0].edges[4].kind, EdgeKind::signs);
  EXPECT_TRUE(spec.inputs[1].edges.empty());
  EXPECT_EQ(spec.params[0].edges.size(), 1u);
  EXPECT_TRUE(spec.has_edges());
  EXPECT_FALSE(spec_from("inputs:\n  - {name: x, shape: [n], dtype: float32}\n").has_edges());
}

TEST(EdgeInputs, BadEdgesAreInputErrorsWithTheirLine) {
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [near(1)]}\n")
                .find("t.crl:4: expected edge around(v), zeros, large(m) or signs (found 'near(1)')"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [around]}\n")
                .find("edge 'around' takes 1 argument(s) (found 0)"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [zeros(1)]}\n")
                .find("edge 'zeros' takes 0 argument(s)"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: []}\n")
                .find("expected edges to be a non-empty list"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: i, shape: [n], dtype: int64, init: 'randint(0, 4)', "
                             "edges: [zeros]}\n")
                .find("edges need a floating dtype (found int64)"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: a, shape: [n, n], dtype: float32, post: [tril], edges: [zeros]}\n")
                .find("edges cannot be combined with post op 'tril'"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [large(0)]}\n")
                .find("edge 'large(0)' needs a finite positive value (found 0)"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float16, edges: [large(40000)]}\n")
                .find("beyond float16's range"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [around(q)]}\n")
                .find("q"),
            std::string::npos);
  EXPECT_NE(bad_spec_message("inputs:\n  - {name: x, shape: [n], dtype: float32, "
                             "edges: [zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros, zeros]}\n")
                .find("at most 8 edges (found 9)"),
            std::string::npos);
}

TEST(EdgeInputs, DeterministicPerSeedAndTensorsWithoutEdgesUnchanged) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: x, shape: [n, m], dtype: float32, edges: [around(2), zeros]}\n"
      "  - {name: y, shape: [n], dtype: float32}\n"
      "params:\n"
      "  - {name: w, shape: [m], dtype: bfloat16, edges: [large(8)]}\n");
  const auto normal = make_arguments(spec, "small", 7, kCpu);
  const auto edge = make_edge_arguments(spec, "small", 7, kCpu);
  const auto again = make_edge_arguments(spec, "small", 7, kCpu);
  const auto other = make_edge_arguments(spec, "small", 8, kCpu);
  ASSERT_EQ(edge.size(), 3u);
  for (size_t i = 0; i < edge.size(); ++i) {
    EXPECT_TRUE(at::equal(edge[i], again[i])) << "argument " << i;
    EXPECT_EQ(edge[i].sizes(), normal[i].sizes());
    EXPECT_EQ(edge[i].scalar_type(), normal[i].scalar_type());
    EXPECT_TRUE(edge[i].is_contiguous());
  }
  EXPECT_FALSE(at::equal(edge[0], other[0]));
  EXPECT_TRUE(at::equal(edge[1], normal[1]));  // y declares no edges
  // Half the elements keep the spec's values; the other half moved.
  const double kept = edge[0].eq(normal[0]).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 1.0 - kEdgeFraction, 0.02);
}

TEST(EdgeInputs, ProducesTheDeclaredEdges) {
  const TaskSpec spec = spec_from(
      "inputs:\n"
      "  - {name: x, shape: [n, m], dtype: float32, edges: [around(-3), around(5), zeros, large(50)]}\n"
      "  - {name: r, shape: [n, m], dtype: float32, init: rand, edges: [signs]}\n"
      "  - {name: h, shape: [n, m], dtype: float16, edges: [around(4)]}\n");
  const auto args = make_edge_arguments(spec, "small", 3, kCpu);
  const at::Tensor& x = args[0];
  // Each of four edges gets kEdgeFraction / 4 of the elements (n * m = 131072: 3% is ~30 sigma).
  const double share = kEdgeFraction / 4;
  // around(v): a quarter of its share exactly at v, most of it within two widths of v, both sides.
  for (const double v : {-3.0, 5.0}) {
    const double width = kAroundWidth * std::max(1.0, std::abs(v));
    EXPECT_NEAR(x.eq(v).to(at::kDouble).mean().item<double>(), share / 4, 0.01) << v;
    EXPECT_NEAR(fraction_near(x, v, 2 * width), share * (0.25 + 0.75 * 0.954), 0.01) << v;
    const at::Tensor near = x.masked_select((x - v).abs().le(2 * width) & x.ne(v));
    const double above = near.gt(v).to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(above, 0.5, 0.05) << v;
  }
  // randn alone reaches |x| >= 4.8 for about 2e-6 of its elements: these come from the edges.
  // around(5) (width 0.25) puts 0.25 + 0.75 * P(N > -0.8) = 0.84 of its share there, large(50) half of its share.
  EXPECT_NEAR(x.ge(4.8).to(at::kDouble).mean().item<double>(), share * 0.841 + share / 2, 0.01);
  // zeros: +0 and -0 in equal parts.
  const at::Tensor zeros = x.masked_select(x.eq(0));
  EXPECT_NEAR(static_cast<double>(zeros.numel()) / x.numel(), share, 0.01);
  EXPECT_NEAR(at::signbit(zeros).to(at::kDouble).mean().item<double>(), 0.5, 0.05);
  // large(50): magnitudes in [50, 100), both signs.
  const at::Tensor large = x.masked_select(x.abs().ge(50));
  EXPECT_NEAR(static_cast<double>(large.numel()) / x.numel(), share, 0.01);
  EXPECT_LT(large.abs().max().item<double>(), 100.0);
  EXPECT_NEAR(large.lt(0).to(at::kDouble).mean().item<double>(), 0.5, 0.05);
  // signs: rand is never negative; the edge trial negates half of its elements.
  EXPECT_NEAR(args[1].lt(0).to(at::kDouble).mean().item<double>(), kEdgeFraction, 0.02);
  EXPECT_GE(args[1].min().item<double>(), -1.0);
  // float16: still at the bound, in its own dtype.
  EXPECT_EQ(args[2].scalar_type(), at::kHalf);
  EXPECT_NEAR(args[2].eq(4).to(at::kDouble).mean().item<double>(), kEdgeFraction / 4, 0.01);
}

TEST(EdgeInputs, ChunkedTensorsGetEdgesInEveryChunk) {
  // Over two chunks: the second chunk must get its own edges, not the first one's copy.
  const TaskSpec spec = spec_from("inputs:\n  - {name: x, shape: [n], dtype: float32, edges: [zeros]}\n",
                                  "{n: " + std::to_string(kEdgeChunkElements + 1000) + "}");
  const auto args = make_edge_arguments(spec, "small", 1, kCpu);
  const at::Tensor tail = args[0].narrow(0, kEdgeChunkElements, 1000);
  EXPECT_NEAR(tail.eq(0).to(at::kDouble).mean().item<double>(), kEdgeFraction, 0.1);
  EXPECT_FALSE(at::equal(tail, args[0].narrow(0, 0, 1000)));
}

// A clamp at bounds the spec's randn inputs almost never cross (|x| > 6: 2e-9 of the elements).
TEST(EdgeInputs, ADroppedSeldomActingClampPassesSpecInputsButNotEdgeInputs) {
  const TaskSpec spec = spec_from(
      "inputs:\n  - {name: x, shape: [n, m], dtype: float32, edges: [around(-6), around(6)]}\n", "{n: 64, m: 512}");
  const auto reference = [](const at::Tensor& x) { return at::clamp(x, -6, 6); };
  const auto candidate = [](const at::Tensor& x) { return x.clone(); };  // drops the clamp
  const Tolerance tol = spec.tolerance_for(at::kFloat);
  const auto passes = [&](const std::vector<at::Tensor>& args) {
    return at::allclose(candidate(args[0]), reference(args[0]), tol.rtol, tol.atol);
  };
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    EXPECT_TRUE(passes(make_arguments(spec, "small", seed, kCpu))) << "spec inputs, seed " << seed;
    EXPECT_FALSE(passes(make_edge_arguments(spec, "small", seed, kCpu))) << "edge inputs, seed " << seed;
  }
}

}  // namespace
}  // namespace crl
