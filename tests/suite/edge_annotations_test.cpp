// The suite's edge annotations: every task whose reference clamps, thresholds or rectifies declares
// edges (or is exempt for a stated reason), every annotation makes edge arguments, and a candidate
// that drops level2/022's seldom-acting clamp passes the spec's inputs but not the edge inputs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <regex>

#include "program/arguments.h"
#include "program/edge_inputs.h"
#include "suite/suite.h"

namespace crl {
namespace {

const at::Device kCpu(at::kCPU);

const Suite& source_suite() {
  static const Suite suite = Suite::load(std::string(CRL_SOURCE_DIR) + "/jobs/suite");
  return suite;
}

// Tasks whose references branch but need no edges, and why (docs/suite.md, "Edge inputs").
const std::map<std::string, std::string>& exempt() {
  static const std::string both_halves = "randn inputs take both branches about half the time";
  static const std::string after_norm =
      "ReLU after a training-mode BatchNorm (or on zero-mean activations): both branches half the time, "
      "and the normalisation undoes any input edge";
  static const std::map<std::string, std::string> tasks = {
      {"level1/019_relu", both_halves},
      {"level1/020_leaky_relu", both_halves},
      {"level1/027_selu", both_halves},
      {"level1/031_elu", both_halves},
      {"level1/100_hinge_loss", "uniform(-1, 2) predictions put the clamp at 0 on about half of the terms"},
      {"level2/083_conv3d_group_norm_min_clamp_dropout", "its output is 0 whatever the inputs (declared degenerate)"},
      {"level3/030_swin_transformer_v2", "masks are fixed by the window layout; clamps guard norms of zero vectors"},
      {"level3/046_netvlad_with_ghost_clusters", "clamp_min(1e-12) guards the norm of a zero vector only"},
      {"level3/047_netvlad_no_ghost_clusters", "clamp_min(1e-12) guards the norm of a zero vector only"},
      {"level3/050_relu_self_attention", "ReLU of attention scores of both signs; the mask is fixed"},
      {"*level3 relu", after_norm},
  };
  return tasks;
}

TEST(EdgeAnnotations, TasksThatClampOrRectifyDeclareEdgesOrAStatedExemption) {
  static const std::regex branchy(
      R"(at::(clamp|clamp_min|clamp_max|hardtanh|relu|leaky_relu|hardswish|hardsigmoid|minimum|maximum|threshold|softplus|elu|selu)\b|\.clamp_(min|max)\()");
  static const std::regex clamps(R"(at::(clamp|clamp_max|hardtanh|hardswish|hardsigmoid|minimum|threshold)\b)");
  size_t annotated = 0;
  for (const Task& task : source_suite().tasks()) {
    const std::string& host = task.program.host.text;
    if (task.spec.has_edges()) {
      ++annotated;
      continue;
    }
    if (!std::regex_search(host, branchy)) continue;
    if (exempt().count(task.id)) continue;
    // Level-3 models whose only branches are ReLUs (no clamp to a bound) are exempt as a group.
    if (task.level == 3 && !std::regex_search(host, clamps)) continue;
    ADD_FAILURE() << task.id << " clamps, thresholds or rectifies but declares no edges and no exemption";
  }
  EXPECT_GE(annotated, 59u);  // the annotations docs/suite.md lists
  for (const auto& [id, reason] : exempt()) {
    if (id[0] == '*') continue;
    EXPECT_NO_THROW(source_suite().find(id)) << "exempt task " << id << " is not in the suite";
    EXPECT_FALSE(source_suite().find(id).spec.has_edges()) << id << " is exempt but declares edges";
  }
}

TEST(EdgeAnnotations, EveryAnnotatedTaskMakesEdgeArgumentsAtTheSmallScale) {
  for (const Task& task : source_suite().tasks()) {
    const TaskSpec& spec = task.spec;
    if (!spec.has_edges()) continue;
    // Large small-scale tensors (a few level-3 ones) would make the test slow; their edges parse
    // and are checked at every scale when the suite loads.
    if (spec.argument_bytes_at("small") > (int64_t{8} << 20)) continue;
    const auto normal = make_arguments(spec, "small", 11, kCpu);
    const auto edge = make_edge_arguments(spec, "small", 11, kCpu);
    ASSERT_EQ(edge.size(), normal.size()) << task.id;
    for (size_t i = 0; i < normal.size(); ++i) {
      EXPECT_EQ(edge[i].sizes(), normal[i].sizes()) << task.id;
      EXPECT_EQ(edge[i].scalar_type(), normal[i].scalar_type()) << task.id;
      if (at::isFloatingType(edge[i].scalar_type())) {
        EXPECT_TRUE(at::isfinite(edge[i]).all().item<bool>()) << task.id << " argument " << i;
      }
      if (spec.arg(i).edges.empty()) {
        EXPECT_TRUE(at::equal(edge[i], normal[i])) << task.id << ": argument " << i << " has no edges";
      } else if (normal[i].numel() > 16) {
        EXPECT_FALSE(at::equal(edge[i], normal[i])) << task.id << ": argument " << i << " declares edges";
      }
    }
  }
}

TEST(EdgeAnnotations, TaskMetadataListsEachTensorsEdges) {
  const nlohmann::json meta = task_metadata_json(source_suite().find("level1/032_hardtanh"));
  EXPECT_EQ(meta["inputs"][0]["edges"], nlohmann::json({"around(-1)", "around(1)"})) << meta.dump();
  const nlohmann::json plain = task_metadata_json(source_suite().find("level1/019_relu"));
  EXPECT_EQ(plain["inputs"][0]["edges"], nlohmann::json::array());
}

// level2/022: z = logsumexp(clamp(4 linear(x), -10, 10)); y = z mish(z). With the spec's rand inputs
// 4 linear(x) has a standard deviation of about 1.3, so the clamp at +-10 never acts and a program
// without it is exact; the edge inputs (signs, large(4)) push the pre-activations past 10.
at::Tensor task022(const std::vector<at::Tensor>& args, bool clamp) {
  at::Tensor y = at::linear(args[0], args[1], args[2]) * 2.0;
  y = y + y;
  if (clamp) y = at::clamp(y, -10.0, 10.0);
  y = at::logsumexp(y, {1}, true);
  return y * at::mish(y);
}

TEST(EdgeAnnotations, ADroppedSeldomActingClampIsCaughtOnlyByEdgeInputs) {
  const Task& task = source_suite().find("level2/022_matmul_scale_residual_add_clamp_log_sum_exp_mish");
  ASSERT_TRUE(std::regex_search(task.program.host.text, std::regex(R"(at::clamp\(y, clamp_min, clamp_max\))")))
      << "the reference changed; this test models it";
  const Tolerance tol = task.spec.tolerance_for(at::kFloat);
  const auto passes = [&](const std::vector<at::Tensor>& args) {
    return at::allclose(task022(args, /*clamp=*/false), task022(args, /*clamp=*/true), tol.rtol, tol.atol);
  };
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EXPECT_TRUE(passes(make_arguments(task.spec, "small", seed, kCpu))) << "spec inputs, seed " << seed;
    EXPECT_FALSE(passes(make_edge_arguments(task.spec, "small", seed, kCpu))) << "edge inputs, seed " << seed;
  }
}

}  // namespace
}  // namespace crl
