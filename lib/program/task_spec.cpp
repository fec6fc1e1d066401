// Parser and validator of a reference's spec section (YAML), with file line numbers in errors.
#include "program/task_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/yaml_file.h"

namespace crl {
namespace {

// Positions inside the spec section, mapped to the .crl file's lines.
class SpecContext {
 public:
  SpecContext(const SourceSection& section, std::string origin)
      : first_line_(section.first_line), origin_(std::move(origin)) {}

  std::string where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return fmt::format("{}:{}", origin_, first_line_);
    return fmt::format("{}:{}", origin_, first_line_ + mark.line);
  }
  std::string where_line(int yaml_line) const { return fmt::format("{}:{}", origin_, first_line_ + yaml_line); }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    throw InputError(fmt::format("{}: {}", where(node), what));
  }
  const std::string& origin() const { return origin_; }

 private:
  int first_line_;
  std::string origin_;
};

std::string dump(const YAML::Node& node) {
  std::string s = YAML::Dump(node);
  if (s.size() > 60) s = s.substr(0, 60) + "...";
  return s;
}

void require_map(const SpecContext& ctx, const YAML::Node& node, const std::string& what) {
  if (!node.IsMap()) ctx.fail(node, fmt::format("expected {} to be a mapping (found '{}')", what, dump(node)));
}

// yaml-cpp keeps one of two equal keys silently; a repeated key is almost always a mistake.
void reject_duplicate_keys(const SpecContext& ctx, const YAML::Node& map, const std::string& what) {
  std::set<std::string> seen;
  for (const auto& entry : map) {
    // A key may itself be a list or a mapping in YAML ("? [a]: b"); no spec key is.
    if (!entry.first.IsScalar()) ctx.fail(entry.first, fmt::format("expected a plain key in {} (found '{}')", what, dump(entry.first)));
    const std::string key = entry.first.Scalar();
    if (!seen.insert(key).second) ctx.fail(entry.first, fmt::format("key '{}' appears twice in {}", key, what));
  }
}

void reject_unknown_keys(const SpecContext& ctx, const YAML::Node& map, const std::set<std::string>& known,
                         const std::string& what) {
  reject_duplicate_keys(ctx, map, what);
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    if (known.count(key) == 0) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      ctx.fail(entry.first, fmt::format("unknown key '{}' in {} (known keys: {})", key, what, list));
    }
  }
}

std::string scalar_text(const SpecContext& ctx, const YAML::Node& node, const std::string& field) {
  if (!node.IsScalar()) {
    ctx.fail(node, fmt::format("expected '{}' to be a single value (found '{}')", field, dump(node)));
  }
  return node.Scalar();
}

std::string required_string(const SpecContext& ctx, const YAML::Node& map, const std::string& key) {
  const YAML::Node v = map[key];
  if (!v) ctx.fail(map, fmt::format("missing field '{}'", key));
  return scalar_text(ctx, v, key);
}

std::string optional_string(const SpecContext& ctx, const YAML::Node& map, const std::string& key) {
  const YAML::Node v = map[key];
  if (!v) return "";
  return scalar_text(ctx, v, key);
}

bool is_identifier(const std::string& s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s, re);
}

// Splits "kind(a, b)" into "kind" and {"a", "b"} (commas inside parentheses stay with their arg).
void split_call(const SpecContext& ctx, const YAML::Node& node, const std::string& text, std::string& kind,
                std::vector<std::string>& args) {
  const auto open = text.find('(');
  args.clear();
  if (open == std::string::npos) {
    kind = text;
  } else {
    kind = text.substr(0, open);
    if (text.back() != ')') ctx.fail(node, fmt::format("expected ')' at the end of '{}'", text));
    const std::string inner = text.substr(open + 1, text.size() - open - 2);
    int depth = 0;
    std::string current;
    for (const char c : inner) {
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == ',' && depth == 0) {
        args.push_back(current);
        current.clear();
      } else {
        current.push_back(c);
      }
    }
    if (!current.empty() || !args.empty()) args.push_back(current);
  }
  while (!kind.empty() && std::isspace(static_cast<unsigned char>(kind.back()))) kind.pop_back();
  while (!kind.empty() && std::isspace(static_cast<unsigned char>(kind.front()))) kind.erase(kind.begin());
}

struct CallForm {
  const char* name;
  size_t arity;
};

InitSpec parse_init(const SpecContext& ctx, const YAML::Node& node) {
  static const std::map<std::string, std::pair<InitKind, size_t>> kinds = {
      {"randn", {InitKind::randn, 0}},     {"rand", {InitKind::rand, 0}},
      {"uniform", {InitKind::uniform, 2}}, {"normal", {InitKind::normal, 2}},
      {"randint", {InitKind::randint, 2}}, {"ones", {InitKind::ones, 0}},
      {"zeros", {InitKind::zeros, 0}},     {"full", {InitKind::full, 1}},
      {"uniform_fan_in", {InitKind::uniform_fan_in, 1}}};
  InitSpec init;
  init.text = scalar_text(ctx, node, "init");
  std::string kind;
  std::vector<std::string> args;
  split_call(ctx, node, init.text, kind, args);
  const auto it = kinds.find(kind);
  if (it == kinds.end()) {
    ctx.fail(node, fmt::format("expected init randn, rand, uniform(lo, hi), normal(mean, std), randint(lo, hi), "
                               "ones, zeros, full(v) or uniform_fan_in(expr) (found '{}')", init.text));
  }
  init.kind = it->second.first;
  if (args.size() != it->second.second) {
    ctx.fail(node, fmt::format("init '{}' takes {} argument(s) (found {})", kind, it->second.second, args.size()));
  }
  for (const auto& a : args) init.args.push_back(Expr::parse(a, ctx.where(node)));
  return init;
}

PostOp parse_post(const SpecContext& ctx, const YAML::Node& node) {
  static const std::map<std::string, std::pair<PostKind, size_t>> kinds = {
      {"abs", {PostKind::abs, 0}},         {"tril", {PostKind::tril, 0}},   {"triu", {PostKind::triu, 0}},
      {"symmetric", {PostKind::symmetric, 0}}, {"softmax", {PostKind::softmax, 1}},
      {"add", {PostKind::add, 1}},         {"mul", {PostKind::mul, 1}},     {"mul_rand", {PostKind::mul_rand, 2}}};
  PostOp op;
  op.text = scalar_text(ctx, node, "post");
  std::string kind;
  std::vector<std::string> args;
  split_call(ctx, node, op.text, kind, args);
  const auto it = kinds.find(kind);
  if (it == kinds.end()) {
    ctx.fail(node, fmt::format("expected post op abs, tril, triu, symmetric, softmax(dim), add(c), mul(c) or "
                               "mul_rand(lo, hi) "
                               "(found '{}')", op.text));
  }
  op.kind = it->second.first;
  if (args.size() != it->second.second) {
    ctx.fail(node, fmt::format("post op '{}' takes {} argument(s) (found {})", kind, it->second.second, args.size()));
  }
  for (const auto& a : args) op.args.push_back(Expr::parse(a, ctx.where(node)));
  return op;
}

EdgeSpec parse_edge(const SpecContext& ctx, const YAML::Node& node) {
  static const std::map<std::string, std::pair<EdgeKind, size_t>> kinds = {
      {"around", {EdgeKind::around, 1}}, {"zeros", {EdgeKind::zeros, 0}},
      {"large", {EdgeKind::large, 1}},   {"signs", {EdgeKind::signs, 0}}};
  EdgeSpec edge;
  edge.text = scalar_text(ctx, node, "edges");
  std::string kind;
  std::vector<std::string> args;
  split_call(ctx, node, edge.text, kind, args);
  const auto it = kinds.find(kind);
  if (it == kinds.end()) {
    ctx.fail(node, fmt::format("expected edge around(v), zeros, large(m) or signs (found '{}')", edge.text));
  }
  edge.kind = it->second.first;
  if (args.size() != it->second.second) {
    ctx.fail(node, fmt::format("edge '{}' takes {} argument(s) (found {})", kind, it->second.second, args.size()));
  }
  for (const auto& a : args) edge.args.push_back(Expr::parse(a, ctx.where(node)));
  return edge;
}

Expr parse_expr_node(const SpecContext& ctx, const YAML::Node& node, const std::string& field) {
  return Expr::parse(scalar_text(ctx, node, field), ctx.where(node));
}

// `mixed` (optional, true by default): whether the values of program/value_mix.h are mixed in.
bool parse_mixed(const SpecContext& ctx, const YAML::Node& node, const std::string& tensor) {
  const YAML::Node mixed = node["mixed"];
  if (!mixed) return true;
  const std::string text = dump(mixed);
  if (!mixed.IsScalar() || (text != "true" && text != "false")) {
    ctx.fail(mixed, fmt::format("tensor '{}': expected mixed to be true or false (found '{}')", tensor, text));
  }
  return text == "true";
}

TensorSpec parse_tensor(const SpecContext& ctx, const YAML::Node& node, const std::string& list) {
  require_map(ctx, node, fmt::format("an entry of '{}'", list));
  reject_unknown_keys(ctx, node, {"name", "shape", "dtype", "init", "post", "edges", "mixed"},
                      fmt::format("an entry of '{}'", list));
  TensorSpec t;
  t.where = ctx.where(node);
  t.name = required_string(ctx, node, "name");
  if (!is_identifier(t.name)) ctx.fail(node["name"], fmt::format("expected a C++ identifier as name (found '{}')", t.name));
  const YAML::Node shape = node["shape"];
  if (!shape) ctx.fail(node, fmt::format("tensor '{}': missing field 'shape'", t.name));
  if (!shape.IsSequence()) ctx.fail(shape, fmt::format("tensor '{}': expected shape to be a list (found '{}')", t.name, dump(shape)));
  for (const auto& dim : shape) t.shape.push_back(parse_expr_node(ctx, dim, "shape"));
  const std::string dtype = required_string(ctx, node, "dtype");
  const auto parsed = dtype_from_name(dtype);
  if (!parsed) {
    ctx.fail(node["dtype"], fmt::format("tensor '{}': expected dtype float32, float16, bfloat16, int64, int32 or bool "
                                        "(found '{}')", t.name, dtype));
  }
  t.dtype = *parsed;
  const bool floating = at::isFloatingType(t.dtype);
  if (node["init"]) {
    t.init = parse_init(ctx, node["init"]);
  } else if (!floating) {
    ctx.fail(node, fmt::format("tensor '{}': missing field 'init' (required for {} tensors)", t.name, dtype));
  } else {
    t.init.text = "randn";
  }
  const InitKind k = t.init.kind;
  const bool needs_float = k == InitKind::randn || k == InitKind::rand || k == InitKind::uniform ||
                           k == InitKind::normal || k == InitKind::uniform_fan_in;
  const YAML::Node init_node = node["init"] ? node["init"] : node;
  if (needs_float && !floating) {
    ctx.fail(init_node, fmt::format("tensor '{}': init '{}' needs a floating dtype (found {}); use randint, "
                                    "ones, zeros or full", t.name, t.init.text, dtype));
  }
  if (k == InitKind::randint && t.dtype == at::ScalarType::Bool) {
    // randint(0, 2) on bool is fine; other ranges are checked at evaluation.
  }
  if (const YAML::Node post = node["post"]) {
    if (!post.IsSequence()) ctx.fail(post, fmt::format("tensor '{}': expected post to be a list", t.name));
    for (const auto& op_node : post) {
      PostOp op = parse_post(ctx, op_node);
      if (t.dtype == at::ScalarType::Bool && op.kind != PostKind::tril && op.kind != PostKind::triu) {
        ctx.fail(op_node, fmt::format("tensor '{}': post op '{}' does not apply to bool", t.name, op.text));
      }
      if ((op.kind == PostKind::symmetric || op.kind == PostKind::softmax || op.kind == PostKind::mul_rand) &&
          !floating) {
        ctx.fail(op_node, fmt::format("tensor '{}': post op '{}' needs a floating dtype (found {})", t.name,
                                      op.text, dtype));
      }
      t.post.push_back(std::move(op));
    }
  }
  if (const YAML::Node edges = node["edges"]) {
    if (!edges.IsSequence() || edges.size() == 0) {
      ctx.fail(edges, fmt::format("tensor '{}': expected edges to be a non-empty list", t.name));
    }
    if (edges.size() > kMaxEdgesPerTensor) {
      ctx.fail(edges, fmt::format("tensor '{}': at most {} edges (found {})", t.name, kMaxEdgesPerTensor, edges.size()));
    }
    if (!floating) {
      ctx.fail(edges, fmt::format("tensor '{}': edges need a floating dtype (found {})", t.name, dtype));
    }
    for (const PostOp& op : t.post) {
      // Edge values replace elements, which would break the structure these ops give the tensor
      // (and that the reference may rely on: a triangular solve, a probability row).
      if (op.kind == PostKind::tril || op.kind == PostKind::triu || op.kind == PostKind::symmetric ||
          op.kind == PostKind::softmax) {
        ctx.fail(edges, fmt::format("tensor '{}': edges cannot be combined with post op '{}'", t.name, op.text));
      }
    }
    for (const auto& edge_node : edges) t.edges.push_back(parse_edge(ctx, edge_node));
  }
  t.mixed = parse_mixed(ctx, node, t.name);
  return t;
}

// `init_args`: a list of single values (tuples and lists quoted, as their commas would split a flow list).
std::vector<InitArg> parse_init_args(const SpecContext& ctx, const YAML::Node& node) {
  if (!node.IsSequence()) {
    ctx.fail(node, fmt::format("expected 'init_args' to be a list, [] for none (found '{}')", dump(node)));
  }
  std::vector<InitArg> args;
  size_t count = 0;
  for (const auto& entry : node) {
    if (!entry.IsScalar()) {
      ctx.fail(entry, fmt::format("init_args: expected a single value; quote a tuple or a list: '(a, b)', '[a, b]' "
                                  "(found '{}')", dump(entry)));
    }
    args.push_back(parse_init_arg(entry.Scalar(), ctx.where(entry) + ": init_args", count));
  }
  return args;
}

// `kernelbench_inputs`: input names (each input once) and values (as init_args writes them).
std::vector<TaskSpec::KernelBenchInput> parse_kernelbench_inputs(const SpecContext& ctx, const YAML::Node& node, const TaskSpec& spec) {
  if (!node.IsSequence()) ctx.fail(node, fmt::format("expected 'kernelbench_inputs' to be a list (found '{}')", dump(node)));
  std::vector<TaskSpec::KernelBenchInput> out;
  std::vector<bool> named(spec.inputs.size(), false);
  size_t count = 0;
  for (const auto& entry : node) {
    if (!entry.IsScalar()) ctx.fail(entry, fmt::format("kernelbench_inputs: expected an input's name or a value (found '{}')", dump(entry)));
    TaskSpec::KernelBenchInput in;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i].name == entry.Scalar()) in.input = i;
    }
    if (in.input) {
      if (named[*in.input]) ctx.fail(entry, fmt::format("kernelbench_inputs: input '{}' is named twice", entry.Scalar()));
      named[*in.input] = true;
    } else {
      in.value = parse_init_arg(entry.Scalar(), ctx.where(entry) + ": kernelbench_inputs", count);
    }
    out.push_back(std::move(in));
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (!named[i]) ctx.fail(node, fmt::format("kernelbench_inputs: input '{}' is missing (name every input once)", spec.inputs[i].name));
  }
  return out;
}

// One entry of `kernelbench_params`' parameters or buffers (`list`): a tensor's qualified name and shape, and
// either the crl param that holds its value (with a transform, where it is not the tensor as it is) or why
// no param does.
KernelBenchTensor parse_kernelbench_tensor(const SpecContext& ctx, const YAML::Node& node, const std::string& list,
                                           const TaskSpec& spec) {
  const std::string what = "kernelbench_params: " + list;
  require_map(ctx, node, "an entry of " + what);
  reject_unknown_keys(ctx, node, {"name", "shape", "param", "transform", "unmatched"}, "an entry of " + what);
  KernelBenchTensor t;
  t.where = ctx.where(node);
  if (!node["name"]) ctx.fail(node, fmt::format("{}: an entry without 'name' (the tensor's qualified name)", what));
  t.name = scalar_text(ctx, node["name"], "name");
  if (!is_kernelbench_name(t.name)) {
    ctx.fail(node["name"], fmt::format("{}: expected a qualified name such as conv.weight or layers.0.bias (found '{}')",
                                       what, t.name));
  }
  const std::string entry = fmt::format("kernelbench_params: {} '{}'", list == "parameters" ? "parameter" : "buffer", t.name);
  const YAML::Node shape = node["shape"];
  if (!shape || !shape.IsSequence()) {
    ctx.fail(shape ? shape : node, fmt::format("{}: expected 'shape' to be a list of expressions ([] for a scalar)", entry));
  }
  for (const auto& dim : shape) {
    t.shape.push_back(Expr::parse(scalar_text(ctx, dim, "shape"), ctx.where(dim) + ": " + entry + " shape"));
  }
  const YAML::Node param = node["param"], unmatched = node["unmatched"], transform = node["transform"];
  if (bool(param) == bool(unmatched)) {
    ctx.fail(node, fmt::format("{}: give either 'param' (the crl param that holds its value) or 'unmatched' (why none "
                               "does), {}", entry, param ? "not both" : "found neither"));
  }
  if (unmatched) {
    t.unmatched = scalar_text(ctx, unmatched, "unmatched");
    if (t.unmatched.empty()) ctx.fail(unmatched, fmt::format("{}: 'unmatched' must say why no param holds it", entry));
    if (transform) ctx.fail(transform, fmt::format("{}: a transform needs a param to transform", entry));
    return t;
  }
  const std::string name = scalar_text(ctx, param, "param");
  for (size_t i = 0; i < spec.params.size(); ++i) {
    if (spec.params[i].name == name) t.param = i;
  }
  if (!t.param) {
    std::string known;
    for (const TensorSpec& p : spec.params) known += (known.empty() ? "" : ", ") + p.name;
    const bool input =
        std::any_of(spec.inputs.begin(), spec.inputs.end(), [&](const TensorSpec& i) { return i.name == name; });
    ctx.fail(param, fmt::format("{}: param '{}' is {} (the params: {})", entry, name,
                                input ? "an input, not a param" : "not one of the spec's params",
                                known.empty() ? "none" : known));
  }
  if (transform) parse_kernelbench_transform(scalar_text(ctx, transform, "transform"), ctx.where(transform) + ": " + entry, t);
  return t;
}

// `kernelbench_params`: the module's tensors, parameters then buffers, each in its declaration order, and the
// crl params no tensor holds (crl_only, each with why). `key` is the key's own node, for the line of errors.
KernelBenchParams parse_kernelbench_params(const SpecContext& ctx, const YAML::Node& key, const YAML::Node& node,
                                           const TaskSpec& spec) {
  if (!node.IsMap()) {
    ctx.fail(node, fmt::format("expected 'kernelbench_params' to be a mapping of parameters and buffers (lists) and "
                               "crl_only (optional) (found '{}')", dump(node)));
  }
  reject_unknown_keys(ctx, node, {"parameters", "buffers", "crl_only"}, "'kernelbench_params'");
  KernelBenchParams kernelbench;
  kernelbench.where = ctx.where(key);
  std::set<std::string> names;
  for (const char* list : {"parameters", "buffers"}) {
    const YAML::Node entries = node[list];
    if (!entries || !entries.IsSequence()) {
      ctx.fail(entries ? entries : key, fmt::format("kernelbench_params: expected '{}' to be a list (the module's named_{}() "
                                                    "in order; [] for none)", list, list));
    }
    auto& out = std::string(list) == "parameters" ? kernelbench.parameters : kernelbench.buffers;
    for (const auto& entry : entries) {
      if (kernelbench.parameters.size() + kernelbench.buffers.size() >= kMaxKernelBenchTensors) {
        ctx.fail(entry, fmt::format("kernelbench_params: more than {} tensors (crl's limit)", kMaxKernelBenchTensors));
      }
      KernelBenchTensor t = parse_kernelbench_tensor(ctx, entry, list, spec);
      if (!names.insert(t.name).second) {
        ctx.fail(entry, fmt::format("kernelbench_params: tensor '{}' appears twice (parameters and buffers share the "
                                    "module's names)", t.name));
      }
      out.push_back(std::move(t));
    }
  }
  if (const YAML::Node crl_only = node["crl_only"]) {
    require_map(ctx, crl_only, "'kernelbench_params: crl_only' (param: why no KernelBench tensor holds it)");
    reject_duplicate_keys(ctx, crl_only, "'kernelbench_params: crl_only'");
    for (const auto& entry : crl_only) {
      const std::string why = scalar_text(ctx, entry.second, "crl_only");
      if (why.empty()) {
        ctx.fail(entry.second, fmt::format("kernelbench_params: crl_only: say why no tensor holds '{}'", entry.first.Scalar()));
      }
      kernelbench.crl_only[entry.first.Scalar()] = why;
    }
  }
  std::vector<std::string> param_names;
  for (const TensorSpec& p : spec.params) param_names.push_back(p.name);
  check_kernelbench_coverage(kernelbench, param_names);
  return kernelbench;
}

// The task's cost expressions at one scale (`where` names it): bytes and flops finite and >= 0, and a
// floor, what every correct program must do, no more than the task's own estimate: a floor above it
// would call the estimate's programs impossible.
void check_costs(const TaskSpec& spec, const ScaleVariables& vars, const std::string& where) {
  for (const Expr* cost : {&spec.flops, &spec.bytes}) {
    const double v = cost->evaluate(vars);
    if (!(v >= 0) || !std::isfinite(v)) {
      throw InputError(fmt::format("{}{}: expression '{}' must be finite and >= 0 (found {})", cost->where(), where, cost->text(), v));
    }
  }
  for (const auto& [floor, cost] : {std::pair{&spec.floor_bytes, &spec.bytes}, std::pair{&spec.floor_flops, &spec.flops}}) {
    if (!*floor) continue;
    const double v = (*floor)->evaluate(vars), limit = cost->evaluate(vars);
    if (!(v >= 0) || !std::isfinite(v) || v > limit) {
      throw InputError(fmt::format("{}{}: floor '{}' must be finite, >= 0 and at most '{}' ({}) (found {})", (*floor)->where(), where,
                                   (*floor)->text(), cost->text(), limit, v));
    }
  }
}

// Evaluates every expression of the spec at every scale, so a bad spec fails when it is read.
void check_at_scales(const SpecContext& ctx, const TaskSpec& spec) {
  for (const auto& [scale, vars] : spec.scales) {
    const auto in_scale = [&, &scale = scale](const std::string& where) {
      return fmt::format("{} (scale '{}')", where, scale);
    };
    for (size_t i = 0; i < spec.num_args(); ++i) {
      const TensorSpec& t = spec.arg(i);
      std::vector<int64_t> shape;
      for (const auto& dim : t.shape) {
        const int64_t n = dim.evaluate_integer(vars);
        if (n < 0) {
          throw InputError(fmt::format("{}: tensor '{}': dimension '{}' is negative ({})", in_scale(t.where),
                                       t.name, dim.text(), n));
        }
        shape.push_back(n);
      }
      const bool floating = at::isFloatingType(t.dtype);
      std::vector<double> init_args;
      for (const auto& a : t.init.args) init_args.push_back(a.evaluate(vars));
      switch (t.init.kind) {
        case InitKind::uniform:
          if (!(init_args[0] < init_args[1])) {
            throw InputError(fmt::format("{}: tensor '{}': init '{}' needs lo < hi", in_scale(t.where), t.name, t.init.text));
          }
          break;
        case InitKind::normal:
          if (!(init_args[1] >= 0)) {
            throw InputError(fmt::format("{}: tensor '{}': init '{}' needs std >= 0", in_scale(t.where), t.name, t.init.text));
          }
          break;
        case InitKind::randint: {
          const int64_t lo = t.init.args[0].evaluate_integer(vars), hi = t.init.args[1].evaluate_integer(vars);
          if (lo >= hi) {
            throw InputError(fmt::format("{}: tensor '{}': init '{}' needs lo < hi", in_scale(t.where), t.name, t.init.text));
          }
          if (t.dtype == at::ScalarType::Bool && (lo < 0 || hi > 2)) {
            throw InputError(fmt::format("{}: tensor '{}': bool init '{}' must stay within randint(0, 2)",
                                         in_scale(t.where), t.name, t.init.text));
          }
          break;
        }
        case InitKind::full:
          if (!floating && t.dtype != at::ScalarType::Bool) t.init.args[0].evaluate_integer(vars);
          break;
        case InitKind::uniform_fan_in:
          if (!(init_args[0] > 0)) {
            throw InputError(fmt::format("{}: tensor '{}': init '{}' needs a positive fan-in (found {})",
                                         in_scale(t.where), t.name, t.init.text, init_args[0]));
          }
          break;
        default:
          break;
      }
      for (const auto& op : t.post) {
        const auto rank = static_cast<int64_t>(shape.size());
        if ((op.kind == PostKind::tril || op.kind == PostKind::triu || op.kind == PostKind::symmetric) && rank < 2) {
          throw InputError(fmt::format("{}: tensor '{}': post op '{}' needs at least 2 dimensions",
                                       in_scale(t.where), t.name, op.text));
        }
        if (op.kind == PostKind::symmetric && shape[rank - 1] != shape[rank - 2]) {
          throw InputError(fmt::format("{}: tensor '{}': post op 'symmetric' needs square last two dimensions "
                                       "(found {} x {})", in_scale(t.where), t.name, shape[rank - 2], shape[rank - 1]));
        }
        if (op.kind == PostKind::softmax) {
          const int64_t dim = op.args[0].evaluate_integer(vars);
          if (dim < -rank || dim >= rank) {
            throw InputError(fmt::format("{}: tensor '{}': softmax dim {} is out of range for {} dimensions",
                                         in_scale(t.where), t.name, dim, rank));
          }
        }
        if ((op.kind == PostKind::add || op.kind == PostKind::mul) && !floating) {
          op.args[0].evaluate_integer(vars);  // integer tensors take whole constants only
        } else {
          for (const auto& a : op.args) a.evaluate(vars);
        }
      }
      for (const EdgeSpec& edge : t.edges) {
        if (edge.args.empty()) continue;
        const double v = edge.args[0].evaluate(vars);
        const bool ok = edge.kind == EdgeKind::large ? (std::isfinite(v) && v > 0) : std::isfinite(v);
        if (!ok) {
          throw InputError(fmt::format("{}: tensor '{}': edge '{}' needs a finite{} value (found {})", in_scale(t.where),
                                       t.name, edge.text, edge.kind == EdgeKind::large ? " positive" : "", v));
        }
        // Edge values reach 2m for large(m) and |v| + a few widths for around(v): they must stay finite.
        constexpr double half_max = 65504.0;
        if (t.dtype == at::ScalarType::Half && 2.5 * std::abs(v) > half_max) {
          throw InputError(fmt::format("{}: tensor '{}': edge '{}' gives values beyond float16's range", in_scale(t.where),
                                       t.name, edge.text));
        }
      }
    }
    spec.check_argument_bytes(scale, kMaxArgumentBytes);
    check_costs(spec, vars, in_scale(""));
    std::vector<const InitArg*> values;  // init_args and kernelbench_inputs' values, evaluated at every scale
    if (spec.init_args) {
      for (const InitArg& arg : *spec.init_args) values.push_back(&arg);
    }
    if (spec.kernelbench_inputs) {
      for (const auto& in : *spec.kernelbench_inputs) {
        if (!in.input) values.push_back(&in.value);
      }
    }
    for (const InitArg* arg : values) {
      try {
        evaluate_init_arg(*arg, vars);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{} (scale '{}')", e.what(), scale));  // e names file, line and key
      }
    }
    if (spec.kernelbench_params) {
      std::vector<std::string> names;
      std::vector<std::vector<int64_t>> shapes;
      for (const TensorSpec& p : spec.params) {
        names.push_back(p.name);
        shapes.emplace_back();
        for (const auto& dim : p.shape) shapes.back().push_back(dim.evaluate_integer(vars));
      }
      check_kernelbench_shapes(*spec.kernelbench_params, names, shapes, vars, scale);
    }
  }
  (void)ctx;
}

}  // namespace

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::ScalarType::Float: return "float32";
    case at::ScalarType::Half: return "float16";
    case at::ScalarType::BFloat16: return "bfloat16";
    case at::ScalarType::Long: return "int64";
    case at::ScalarType::Int: return "int32";
    case at::ScalarType::Bool: return "bool";
    default:
      throw InputError(fmt::format("dtype {} is not one the crl program format knows", c10::toString(dtype)));
  }
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  static const std::map<std::string, at::ScalarType> names = {
      {"float32", at::ScalarType::Float}, {"float16", at::ScalarType::Half}, {"bfloat16", at::ScalarType::BFloat16},
      {"int64", at::ScalarType::Long},    {"int32", at::ScalarType::Int},    {"bool", at::ScalarType::Bool}};
  const auto it = names.find(name);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

const ScaleVariables& TaskSpec::scale_variables(const std::string& scale) const {
  const auto it = scales.find(scale);
  if (it == scales.end()) {
    std::string known;
    for (const auto& [name, vars] : scales) known += (known.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("{}: task '{}' has no scale '{}' (it has: {})", origin, id, scale, known));
  }
  return it->second;
}

std::vector<int64_t> TaskSpec::shape_at(const TensorSpec& tensor, const std::string& scale) const {
  const ScaleVariables& vars = scale_variables(scale);
  std::vector<int64_t> shape;
  shape.reserve(tensor.shape.size());
  for (const auto& dim : tensor.shape) shape.push_back(dim.evaluate_integer(vars));
  return shape;
}

double TaskSpec::flops_at(const std::string& scale) const { return flops.evaluate(scale_variables(scale)); }
double TaskSpec::bytes_at(const std::string& scale) const { return bytes.evaluate(scale_variables(scale)); }
double TaskSpec::floor_bytes_at(const std::string& scale) const {
  return floor_bytes ? floor_bytes->evaluate(scale_variables(scale)) : 0.0;
}
double TaskSpec::floor_flops_at(const std::string& scale) const {
  return floor_flops ? floor_flops->evaluate(scale_variables(scale)) : 0.0;
}

Tolerance TaskSpec::tolerance_for(at::ScalarType output_dtype) const {
  if (!at::isFloatingType(output_dtype) && !at::isComplexType(output_dtype)) return {0, 0};
  return tolerance ? *tolerance : default_tolerance(output_dtype);
}

std::vector<InitValue> TaskSpec::init_args_at(const std::string& scale) const {
  const ScaleVariables& vars = scale_variables(scale);
  if (!init_args) throw InputError(fmt::format("{}: task '{}' records no init_args (its module's constructor arguments)", origin, id));
  std::vector<InitValue> values;
  for (const InitArg& arg : *init_args) values.push_back(evaluate_init_arg(arg, vars));
  return values;
}

std::vector<int64_t> TaskSpec::kernelbench_shape_at(const KernelBenchTensor& tensor, const std::string& scale) const {
  const ScaleVariables& vars = scale_variables(scale);
  std::vector<int64_t> shape;
  for (const auto& dim : tensor.shape) shape.push_back(dim.evaluate_integer(vars));
  return shape;
}

const TensorSpec& TaskSpec::arg(size_t index) const {
  if (index < inputs.size()) return inputs[index];
  if (index < num_args()) return params[index - inputs.size()];
  throw Error(fmt::format("{}: argument {} asked of task '{}', which has {}", origin, index, id, num_args()));
}

bool TaskSpec::has_edges() const {
  for (size_t i = 0; i < num_args(); ++i) {
    if (!arg(i).edges.empty()) return true;
  }
  return false;
}

int64_t TaskSpec::tensor_bytes_at(const TensorSpec& tensor, const std::string& scale) const {
  int64_t bytes = static_cast<int64_t>(c10::elementSize(tensor.dtype));
  for (const int64_t n : shape_at(tensor, scale)) {
    if (n < 0 || __builtin_mul_overflow(bytes, n, &bytes)) {
      throw InputError(fmt::format("{}: task '{}': tensor '{}' at scale '{}' has a dimension that is negative or "
                                   "makes its size overflow 64 bits; make its shape smaller",
                                   tensor.where, id, tensor.name, scale));
    }
  }
  return bytes;
}

int64_t TaskSpec::argument_bytes_at(const std::string& scale) const {
  int64_t total = 0;
  for (size_t i = 0; i < num_args(); ++i) {
    const TensorSpec& t = arg(i);
    if (__builtin_add_overflow(total, tensor_bytes_at(t, scale), &total)) {
      throw InputError(fmt::format("{}: task '{}': the arguments at scale '{}' overflow 64 bits of bytes at tensor "
                                   "'{}'; make the shapes smaller", t.where, id, scale, t.name));
    }
  }
  return total;
}

void TaskSpec::check_argument_bytes(const std::string& scale, int64_t limit_bytes) const {
  const int64_t total = argument_bytes_at(scale);
  if (total <= limit_bytes) return;
  const TensorSpec* largest = nullptr;
  int64_t largest_bytes = -1;
  for (size_t i = 0; i < num_args(); ++i) {
    const int64_t b = tensor_bytes_at(arg(i), scale);
    if (b > largest_bytes) largest = &arg(i), largest_bytes = b;
  }
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  throw InputError(fmt::format("{}: task '{}': the arguments at scale '{}' take {:.2f} GiB, over the limit of {:.2f} "
                               "GiB; the largest is tensor '{}' ({:.2f} GiB); make the scale's shapes smaller",
                               largest->where, id, scale, total / gib, limit_bytes / gib, largest->name,
                               largest_bytes / gib));
}

std::vector<std::string> TaskSpec::scale_names() const {
  std::vector<std::string> names;
  for (const auto& [name, vars] : scales) names.push_back(name);
  return names;
}

namespace {

TaskSpec parse_task_spec_unguarded(const SourceSection& section, const std::string& origin);

}  // namespace

TaskSpec parse_task_spec(const SourceSection& section, const std::string& origin) {
  try {
    return parse_task_spec_unguarded(section, origin);
  } catch (const YAML::Exception& e) {
    // A conversion the checks above did not foresee: still bad input, with its place.
    throw InputError(fmt::format("{}:{}: unexpected YAML in the spec: {}", origin,
                                 section.first_line + (e.mark.is_null() ? 0 : e.mark.line), e.msg));
  }
}

namespace {

TaskSpec parse_task_spec_unguarded(const SourceSection& section, const std::string& origin) {
  if (!section.present) {
    throw InputError(fmt::format("{}: expected a '// crl:spec' section (a reference program declares its task)", origin));
  }
  const SpecContext ctx(section, origin);
  YAML::Node root;
  try {
    root = YAML::Load(section.text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}: YAML syntax error in the spec: {}", origin,
                                 section.first_line + (e.mark.is_null() ? 0 : e.mark.line), e.msg));
  }
  // Aliases expanded past a bound (a cycle, "billion laughs") would hang or crash what walks it.
  check_yaml_expansion(root, fmt::format("{} (spec from line {})", origin, section.first_line));
  if (!root.IsMap()) {
    throw InputError(fmt::format("{}:{}: expected the spec to be a YAML mapping (task, inputs, scales, ...)",
                                 origin, section.first_line));
  }
  reject_unknown_keys(ctx, root,
                      {"task", "name", "category", "description", "notes", "inputs", "params", "scales", "flops",
                       "bytes", "floor", "tolerance", "init_args", "kernelbench_params", "kernelbench_inputs"},
                      "the spec");
  TaskSpec spec;
  spec.origin = origin;
  spec.id = required_string(ctx, root, "task");
  static const std::regex id_re("level[0-9]+/[0-9]{3}_[a-z0-9_]+");
  if (!std::regex_match(spec.id, id_re)) {
    ctx.fail(root["task"], fmt::format("expected task id level<N>/<NNN>_<name> (lower case, digits, '_') (found '{}')",
                                       spec.id));
  }
  spec.name = optional_string(ctx, root, "name");
  spec.category = required_string(ctx, root, "category");
  spec.description = optional_string(ctx, root, "description");
  spec.notes = optional_string(ctx, root, "notes");

  std::set<std::string> names;
  for (const char* list : {"inputs", "params"}) {
    const YAML::Node node = root[list];
    auto& out = std::string(list) == "inputs" ? spec.inputs : spec.params;
    if (!node || node.IsNull()) {
      if (std::string(list) == "inputs") ctx.fail(root, "missing field 'inputs' (forward needs at least one input)");
      continue;
    }
    if (!node.IsSequence()) ctx.fail(node, fmt::format("expected '{}' to be a list of tensors", list));
    for (const auto& entry : node) {
      TensorSpec t = parse_tensor(ctx, entry, list);
      if (!names.insert(t.name).second) {
        ctx.fail(entry, fmt::format("tensor name '{}' is used twice (inputs and params share one namespace)", t.name));
      }
      out.push_back(std::move(t));
    }
  }
  if (spec.inputs.empty()) ctx.fail(root["inputs"], "expected at least one input");

  const YAML::Node scales = root["scales"];
  if (!scales) ctx.fail(root, "missing field 'scales'");
  require_map(ctx, scales, "'scales'");
  if (scales.size() == 0) ctx.fail(scales, "expected at least one scale");
  reject_duplicate_keys(ctx, scales, "'scales'");
  for (const auto& entry : scales) {
    const std::string scale = entry.first.as<std::string>();
    if (!is_identifier(scale)) ctx.fail(entry.first, fmt::format("expected an identifier as scale name (found '{}')", scale));
    const YAML::Node vars = entry.second;
    if (vars.IsNull()) {
      spec.scales[scale] = {};
      continue;
    }
    require_map(ctx, vars, fmt::format("scale '{}'", scale));
    reject_duplicate_keys(ctx, vars, fmt::format("scale '{}'", scale));
    ScaleVariables values;
    for (const auto& v : vars) {
      const std::string var = v.first.as<std::string>();
      if (!is_identifier(var)) ctx.fail(v.first, fmt::format("expected an identifier as variable name (found '{}')", var));
      const Expr value = parse_expr_node(ctx, v.second, var);
      if (!value.variables().empty()) {
        ctx.fail(v.second, fmt::format("scale '{}': variable '{}' must be a number (found '{}')", scale, var,
                                       value.text()));
      }
      values[var] = value.evaluate_integer({});
    }
    spec.scales[scale] = std::move(values);
  }

  for (const char* field : {"flops", "bytes"}) {
    const YAML::Node node = root[field];
    if (!node) ctx.fail(root, fmt::format("missing field '{}'", field));
    (std::string(field) == "flops" ? spec.flops : spec.bytes) = parse_expr_node(ctx, node, field);
  }

  if (const YAML::Node floor = root["floor"]) {
    require_map(ctx, floor, "'floor'");
    reject_unknown_keys(ctx, floor, {"bytes", "flops"}, "'floor'");
    if (floor["bytes"]) spec.floor_bytes = parse_expr_node(ctx, floor["bytes"], "floor bytes");
    if (floor["flops"]) spec.floor_flops = parse_expr_node(ctx, floor["flops"], "floor flops");
  }

  if (const YAML::Node tol = root["tolerance"]) {
    require_map(ctx, tol, "'tolerance'");
    reject_unknown_keys(ctx, tol, {"atol", "rtol"}, "'tolerance'");
    Tolerance t;
    for (const char* key : {"atol", "rtol"}) {
      const YAML::Node v = tol[key];
      if (!v) ctx.fail(tol, fmt::format("tolerance: missing field '{}'", key));
      const Expr e = parse_expr_node(ctx, v, key);
      if (!e.variables().empty()) ctx.fail(v, fmt::format("tolerance '{}' must be a number", key));
      const double value = e.evaluate({});
      if (!(value >= 0) || !std::isfinite(value)) ctx.fail(v, fmt::format("tolerance '{}' must be >= 0", key));
      (std::string(key) == "atol" ? t.atol : t.rtol) = value;
    }
    spec.tolerance = t;
  }
  if (const YAML::Node init_args = root["init_args"]) spec.init_args = parse_init_args(ctx, init_args);
  if (const YAML::Node inputs = root["kernelbench_inputs"]) spec.kernelbench_inputs = parse_kernelbench_inputs(ctx, inputs, spec);
  for (const auto& entry : root) {
    if (entry.first.Scalar() == "kernelbench_params") {
      spec.kernelbench_params = parse_kernelbench_params(ctx, entry.first, entry.second, spec);
    }
  }
  check_at_scales(ctx, spec);
  return spec;
}

}  // namespace

}  // namespace crl
