// The embedded Python behind python_program.h: built where crl found the headers and library of the
// Python whose torch it links, so that `import torch` there finds this process's own LibTorch (one
// libtorch, tensors passed to Python and back without copies).
#include <torch/csrc/autograd/python_variable.h>  // Python.h first, as Python asks
#include <torch/csrc/utils/pybind.h>
#include <pybind11/eval.h>

#include "pyprogram/python_program.h"

#include <ATen/ATen.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <optional>

#include "program/init_args.h"

namespace py = pybind11;

namespace crl::pyprogram {
namespace {

// What a Python exception says: its type and message first (the line a table shows), then its
// traceback, whose end is kept when long (a deep recursion's runs to thousands of lines; the last
// frames say where).
std::string describe(py::error_already_set& e) {
  constexpr size_t kMaxHeadline = 1000, kMaxTraceback = 3000;
  std::string headline, traceback;
  try {
    const py::module_ tb = py::module_::import("traceback");
    for (const auto& line : py::list(tb.attr("format_exception_only")(e.type(), e.value()))) headline += line.cast<std::string>();
    for (const auto& line : py::list(tb.attr("format_tb")(e.trace()))) traceback += line.cast<std::string>();
  } catch (...) {
    headline = e.what();
  }
  const auto trim = [](std::string& s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  };
  trim(headline);
  trim(traceback);
  if (headline.size() > kMaxHeadline) headline = headline.substr(0, kMaxHeadline) + "...";
  if (traceback.size() > kMaxTraceback) traceback = "..." + traceback.substr(traceback.size() - kMaxTraceback);
  return traceback.empty() ? headline : headline + "\nTraceback (most recent call last):\n" + traceback;
}

// A dtype as PyTorch's Python spells it (float64, int8, ...), for any dtype a module may hold.
std::string torch_dtype_name(at::ScalarType dtype) {
  const auto empty = py::reinterpret_steal<py::object>(THPVariable_Wrap(at::empty({0}, at::TensorOptions().dtype(dtype))));
  const auto name = py::str(empty.attr("dtype")).cast<std::string>();
  return name.rfind("torch.", 0) == 0 ? name.substr(6) : name;
}

// A KernelBench tensor's name, kind and shape for messages: "conv.weight [64, 3, 3, 3] float32".
std::string describe_tensor(const std::string& name, const at::Tensor& tensor) {
  return fmt::format("{} [{}] {}", name, fmt::join(tensor.sizes(), ", "), torch_dtype_name(tensor.scalar_type()));
}

// A __torch_function__ or dispatch mode the candidate left on: it would run inside this worker's own
// operations after forward (describing, copying and guarding the outputs), where it could change
// what the judge reads. Such a candidate is refused (modes used within forward and left are fine).
void check_no_modes_left(const std::string& when) {
  const int64_t function_modes = at::impl::PythonTorchFunctionTLS::stack_len();
  const int64_t dispatch_modes = c10::impl::TorchDispatchModeTLS::stack_len();
  if (function_modes == 0 && dispatch_modes == 0) return;
  throw Error(fmt::format("{} left {} __torch_function__ and {} dispatch mode(s) active: they would run inside crl's own operations "
                          "on the outputs; leave every mode before returning",
                          when, function_modes, dispatch_modes));
}

// Run once in __main__ before any candidate: torch imported, and torch.utils.cpp_extension's builders
// replaced (they start a compiler, which the sandboxed worker cannot): load_inline records its call
// and, once crl's compiler has built it (_crl_builds: key -> library), imports the built module;
// load (of source files) and torch.compile (compiler processes) are refused with the reason.
constexpr const char* kBootstrap = R"PY(
import torch, torch.nn, torch.nn.functional, math
import hashlib, importlib.machinery, importlib.util, json, logging, os
os.environ.setdefault("USER", "crl-candidate")  # getpass.getuser() (torch._dynamo's import asks) without /etc/passwd
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)  # its "No CUDA runtime" note on the CPU
import torch.utils.cpp_extension as _cpp_extension

class CrlUnsupported(Exception):
    """A candidate uses what crl's judge does not serve."""

class CrlNeedsBuild(Exception):
    """A load_inline extension is used before crl's compiler has built it."""

_crl_builds = {}
_crl_failed = {}
_crl_pending = []

def _crl_texts(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value)
    if not all(isinstance(v, str) for v in value):
        raise CrlUnsupported("load_inline's " + what + " must be strings")
    return list(value)

class _CrlUnbuilt:
    def __init__(self, name):
        self._crl_name = name
    def __getattr__(self, attribute):
        raise CrlNeedsBuild(self._crl_name)

def _crl_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                     extra_ldflags=None, extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None,
                     is_python_module=True, with_pytorch_error_handling=True, keep_intermediates=True, use_pch=False,
                     no_implicit_headers=False):
    if extra_include_paths:
        raise CrlUnsupported("load_inline's extra_include_paths name folders crl's compiler may not read (it reads the toolchain's headers only)")
    if not is_python_module:
        raise CrlUnsupported("load_inline with is_python_module=False (a library of torch ops) is not served by crl yet")
    call = {"name": str(name), "cpp_sources": "\n".join(_crl_texts(cpp_sources, "cpp_sources")),
            "cuda_sources": "\n".join(_crl_texts(cuda_sources, "cuda_sources")),
            "functions": _crl_texts(functions, "functions"), "bindings": functions is not None,
            "extra_cflags": _crl_texts(extra_cflags, "extra_cflags"),
            "extra_cuda_cflags": _crl_texts(extra_cuda_cflags, "extra_cuda_cflags"),
            "extra_ldflags": _crl_texts(extra_ldflags, "extra_ldflags")}
    key = hashlib.sha256(json.dumps(call, sort_keys=True).encode()).hexdigest()
    if key in _crl_failed:
        raise RuntimeError("Error building extension '" + call["name"] + "': " + _crl_failed[key])
    if key in _crl_builds:
        loader = importlib.machinery.ExtensionFileLoader(call["name"], _crl_builds[key])
        spec = importlib.util.spec_from_loader(call["name"], loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module
    call["key"] = key
    _crl_pending.append(call)
    return _CrlUnbuilt(call["name"])

def _crl_refuse_load(*args, **kwargs):
    raise CrlUnsupported("torch.utils.cpp_extension.load builds source files of the candidate's machine; crl builds "
                         "load_inline's sources only")

def _crl_refuse_compile(*args, **kwargs):
    raise CrlUnsupported("torch.compile starts compiler processes (Inductor, Triton), which a candidate's sandboxed worker "
                         "cannot; write the kernels with load_inline, which crl compiles")

_cpp_extension.load_inline = _crl_load_inline
_cpp_extension.load = _crl_refuse_load
torch.compile = _crl_refuse_compile
)PY";

// The bootstrap's objects (in __main__, which lives as long as Python).
py::object bootstrap(const char* name) { return py::module_::import("__main__").attr(name); }

// NeedsBuild when the module's load_inline calls wait for crl's compiler.
void throw_if_builds_pending() {
  const py::list pending = bootstrap("_crl_pending");
  if (pending.size() == 0) return;
  throw NeedsBuild(py::module_::import("json").attr("dumps")(pending).cast<std::string>());
}

}  // namespace

bool python_available() { return true; }

std::string python_description() { return fmt::format("embedded Python from {}", CRL_PYTHON_EXECUTABLE); }

std::vector<std::string> start_python() {
  static std::vector<std::string> folders;
  static bool started = false;
  if (started) return folders;
  PyConfig config;
  // Isolated: PYTHON* variables, the user's site folder and the current folder play no part.
  PyConfig_InitIsolatedConfig(&config);
  config.write_bytecode = 0;           // nothing written into site-packages (the file rules forbid it anyway)
  config.install_signal_handlers = 0;  // the worker's signals stay the worker's
  // The executable whose torch crl links: Python finds its venv (pyvenv.cfg) and site-packages from it.
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, CRL_PYTHON_EXECUTABLE);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) {
    throw Error(fmt::format("embedded Python ({}) did not start: {}", CRL_PYTHON_EXECUTABLE,
                            status.err_msg != nullptr ? status.err_msg : "no reason given"));
  }
  started = true;
  try {
    py::exec(kBootstrap, py::module_::import("__main__").attr("__dict__"));
    for (const auto& entry : py::list(py::module_::import("sys").attr("path"))) {
      const auto folder = entry.cast<std::string>();
      std::error_code error;
      if (!folder.empty() && std::filesystem::exists(folder, error)) folders.push_back(folder);
    }
  } catch (py::error_already_set& e) {
    throw Error(fmt::format("embedded Python ({}) could not import torch: {}", CRL_PYTHON_EXECUTABLE, describe(e)));
  }
  return folders;
}

struct PythonProgramState {
  // A crl param's value given to one of the module's tensors before each call.
  struct Binding {
    at::Tensor target;  // the module's parameter or buffer (its TensorImpl is the Python object's)
    size_t arg = 0;     // in forward's arguments (inputs, then params)
    KernelBenchTransform transform = KernelBenchTransform::identity;
    std::vector<int64_t> shape;  // the module tensor's
    int64_t dim0 = 0, dim1 = 0;
    std::vector<int64_t> param_shape;  // the crl param's
  };
  std::string origin;
  std::string class_name;  // ModelNew, or KernelBench's Model (BuildRule)
  py::dict globals;
  py::object model;
  py::object tensor_class;  // torch.Tensor, looked up once (forward checks every output's type)
  // forward's arguments in KernelBench's order: an input's index, or a constant (spec's kernelbench_inputs).
  struct CallArgument {
    std::optional<size_t> input;
    py::object constant;
  };
  std::vector<CallArgument> call;
  size_t num_inputs = 0, num_args = 0;
  std::vector<Binding> bindings;
  bool bind_each_call = true;  // crl's rule; under KernelBench's the module keeps its own values
};

namespace {

// The module's tensors of one kind against the spec's, by order and shape: a binding for each one a
// crl param holds; FormatError naming the first difference.
void match_tensors(const std::string& kind, const py::list& named, const std::vector<KernelBenchTensor>& expected,
                   const TaskSpec& spec, const std::string& scale, PythonProgramState& state, const std::string& origin);

}  // namespace

PythonProgram::PythonProgram(const std::string& source, const std::string& origin, const std::vector<ExtensionLibrary>& extensions,
                             const TaskSpec& spec, const std::string& scale, at::Device device, const BuildRule& rule)
    : state_(std::make_unique<PythonProgramState>()) {
  (void)start_python();
  {
    py::dict builds = bootstrap("_crl_builds"), failed = bootstrap("_crl_failed");
    for (const auto& e : extensions) {
      if (e.error.empty()) {
        builds[py::str(e.key)] = e.library;
      } else {
        failed[py::str(e.key)] = e.error;
      }
    }
  }
  PythonProgramState& s = *state_;
  s.origin = origin;
  s.class_name = rule.class_name;
  s.tensor_class = py::module_::import("torch").attr("Tensor");
  s.num_inputs = spec.inputs.size();
  s.num_args = spec.num_args();
  if (spec.kernelbench_inputs) {
    for (const auto& in : *spec.kernelbench_inputs) {
      if (in.input) {
        s.call.push_back({in.input, py::none()});
      } else {
        const std::string literal = python_literal(evaluate_init_arg(in.value, spec.scale_variables(scale)));
        s.call.push_back({std::nullopt, py::module_::import("ast").attr("literal_eval")(literal)});
      }
    }
  } else {
    for (size_t i = 0; i < s.num_inputs; ++i) s.call.push_back({i, py::none()});
  }
  const py::module_ builtins = py::module_::import("builtins");
  try {
    s.globals["__name__"] = "crl_candidate";
    s.globals["__file__"] = origin;
    s.globals["__builtins__"] = builtins;
    builtins.attr("exec")(builtins.attr("compile")(source, origin, "exec"), s.globals);
  } catch (py::error_already_set& e) {
    if (e.matches(bootstrap("CrlNeedsBuild"))) throw_if_builds_pending();
    if (e.matches(bootstrap("CrlUnsupported"))) throw FormatError(fmt::format("{}: {}", origin, describe(e)));
    throw ImportError(fmt::format("{}: the module raised while it was executed:\n{}", origin, describe(e)));
  }
  throw_if_builds_pending();
  const py::object module_class = py::module_::import("torch.nn").attr("Module");
  const std::string& name = rule.class_name;
  if (!s.globals.contains(name.c_str())) throw FormatError(fmt::format("{}: defines no {} (KernelBench's format)", origin, name));
  const py::object model_class = s.globals[name.c_str()];
  if (!PyType_Check(model_class.ptr())) {
    throw FormatError(fmt::format("{}: {} is a {}, not a class", origin, name,
                                  py::str(py::type::of(model_class).attr("__name__")).cast<std::string>()));
  }
  if (PyObject_IsSubclass(model_class.ptr(), module_class.ptr()) != 1) {
    PyErr_Clear();
    throw FormatError(fmt::format("{}: class {} does not derive from torch.nn.Module", origin, name));
  }
  if (!spec.init_args || !spec.kernelbench_params) {
    throw FormatError(fmt::format("{}: task {} records no {} (docs/program-format.md), so a KernelBench-format candidate "
                                  "cannot be built for it",
                                  origin, spec.id, !spec.init_args ? "init_args" : "kernelbench_params"));
  }
  const std::string init_args = python_literal(spec.init_args_at(scale));
  try {
    const py::list args = py::module_::import("ast").attr("literal_eval")(init_args);
    // KernelBench's rule: its seed before the constructor, which makes its tensors on the CPU.
    if (rule.seed != 0) py::module_::import("torch").attr("manual_seed")(rule.seed);
    s.model = model_class(*args);
    s.model = s.model.attr("to")(py::str(device.str()));
    // The module stays in training mode, as KernelBench calls it (batch norm on the batch's own
    // statistics, as crl's references compute it), but its dropout layers run as at inference:
    // crl's references treat dropout as the identity (a random mask no candidate could match).
    const py::object dropout = py::module_::import("torch.nn.modules.dropout").attr("_DropoutNd");
    for (const auto& m : py::iter(s.model.attr("modules")())) {
      if (py::isinstance(m, dropout)) m.attr("eval")();
    }
  } catch (py::error_already_set& e) {
    if (e.matches(bootstrap("CrlNeedsBuild"))) throw_if_builds_pending();
    if (e.matches(bootstrap("CrlUnsupported"))) throw FormatError(fmt::format("{}: {}", origin, describe(e)));
    throw Error(fmt::format("{}: {}(*{}) raised:\n{}", origin, name, init_args, describe(e)));
  }
  throw_if_builds_pending();
  // Under KernelBench's rule a candidate's tensors are its own business (its outputs are judged);
  // KernelBench's Model is matched all the same, for the values it gives crl's reference.
  s.bind_each_call = rule.seed == 0;
  if (!s.bind_each_call && name == "ModelNew") {
    check_no_modes_left(origin + ": the module or ModelNew's constructor");
    return;
  }
  try {
    match_tensors("parameter", py::list(s.model.attr("named_parameters")()), spec.kernelbench_params->parameters, spec, scale, s,
                  origin);
    match_tensors("buffer", py::list(s.model.attr("named_buffers")()), spec.kernelbench_params->buffers, spec, scale, s, origin);
  } catch (py::error_already_set& e) {
    throw Error(fmt::format("{}: listing {}'s parameters and buffers raised:\n{}", origin, name, describe(e)));
  }
  check_no_modes_left(fmt::format("{}: the module or {}'s constructor", origin, name));
}

PythonProgram::~PythonProgram() = default;

namespace {

void match_tensors(const std::string& kind, const py::list& named, const std::vector<KernelBenchTensor>& expected,
                   const TaskSpec& spec, const std::string& scale, PythonProgramState& state, const std::string& origin) {
  std::vector<std::pair<std::string, at::Tensor>> found;
  for (const auto& item : named) {
    const auto pair = item.cast<py::tuple>();
    found.emplace_back(pair[0].cast<std::string>(), pair[1].cast<at::Tensor>());
  }
  constexpr size_t kListed = 8;  // a level-3 network has hundreds
  const auto listing = [&] {
    std::vector<std::string> names;
    for (size_t i = 0; i < std::min(kListed, found.size()); ++i) names.push_back(describe_tensor(found[i].first, found[i].second));
    if (found.size() > kListed) names.push_back("...");
    return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, "; "));
  };
  const auto wanted = [&] {
    std::vector<std::string> names;
    for (size_t i = 0; i < std::min(kListed, expected.size()); ++i) {
      names.push_back(fmt::format("{} [{}]", expected[i].name, fmt::join(spec.kernelbench_shape_at(expected[i], scale), ", ")));
    }
    if (expected.size() > kListed) names.push_back("...");
    return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, "; "));
  };
  if (found.size() != expected.size()) {
    throw FormatError(fmt::format("{}: {} has {} {}s ({}); task {}'s KernelBench module has {} ({}) at scale {} (crl gives a "
                                  "KernelBench-format candidate the task's values by the order and shapes of its module's {}s)",
                                  origin, state.class_name, found.size(), kind, listing(), spec.id, expected.size(), wanted(), scale, kind));
  }
  for (size_t i = 0; i < found.size(); ++i) {
    const auto& [name, tensor] = found[i];
    const KernelBenchTensor& want = expected[i];
    const std::vector<int64_t> shape = spec.kernelbench_shape_at(want, scale);
    if (tensor.sizes() != at::IntArrayRef(shape)) {
      throw FormatError(fmt::format("{}: {}'s {} {} ({}) has shape [{}]; the task's {} {} ({}) has [{}] at scale {}", origin,
                                    state.class_name, kind,
                                    i + 1, name, fmt::join(tensor.sizes(), ", "), kind, i + 1, want.name, fmt::join(shape, ", "),
                                    scale));
    }
    if (!want.param) continue;  // a tensor crl does not model keeps the candidate's own value
    const TensorSpec& param = spec.params[*want.param];
    if (tensor.scalar_type() != param.dtype) {
      throw FormatError(fmt::format("{}: {}'s {} {} ({}) is {}; the task's {} ({}) is {}", origin, state.class_name, kind, i + 1, name,
                                    torch_dtype_name(tensor.scalar_type()), want.name, param.name, dtype_name(param.dtype)));
    }
    state.bindings.push_back({tensor, spec.inputs.size() + *want.param, want.transform, shape, want.dim0, want.dim1,
                              spec.shape_at(param, scale)});
  }
}

// A param's value as the module's tensor holds it: the same tensor, a view of it in the tensor's
// shape, or its transpose made contiguous (a kernel may read the tensor's memory as laid out; the
// copy is part of the candidate's call, the price of a layout crl's reference does not share).
at::Tensor bound_value(const PythonProgramState::Binding& b, const at::Tensor& value) {
  switch (b.transform) {
    case KernelBenchTransform::identity: return value;
    case KernelBenchTransform::reshape: return value.view(b.shape);
    case KernelBenchTransform::transpose: return value.transpose(b.dim0, b.dim1).contiguous();
  }
  return value;
}

// A returned object as a tensor: exactly torch.Tensor (`tensor_class`; not Parameter, not a
// subclass, whose methods would run inside the judge's comparison), strided. `index`: its place in
// forward's tuple (0: forward returned it alone), named only in a failure's message.
at::Tensor plain_tensor(const py::handle& object, const py::object& tensor_class, size_t index) {
  const auto what = [index] { return index == 0 ? std::string("forward's output") : fmt::format("forward's output {}", index); };
  if (!py::isinstance(object, tensor_class)) {
    throw Error(fmt::format("{} is a {}: expected a tensor or a tuple of tensors", what(),
                            py::str(py::type::of(object).attr("__name__")).cast<std::string>()));
  }
  if (!py::type::of(object).is(tensor_class)) {
    throw Error(fmt::format("{} is a {}, a subclass of torch.Tensor: outputs must be plain tensors (a subclass's methods "
                            "would run inside crl's comparison)",
                            what(), py::str(py::type::of(object).attr("__name__")).cast<std::string>()));
  }
  at::Tensor tensor = THPVariable_Unpack(object.ptr());
  if (tensor.layout() != at::kStrided) {
    throw Error(fmt::format("{} has layout {}: outputs must be dense (strided) tensors", what(), c10::str(tensor.layout())));
  }
  return tensor;
}

}  // namespace

std::vector<at::Tensor> PythonProgram::forward(const std::vector<at::Tensor>& args) const {
  const PythonProgramState& s = *state_;
  if (args.size() != s.num_args) throw Error(fmt::format("ModelNew called with {} arguments, the task has {}", args.size(), s.num_args));
  if (s.bind_each_call) {
    for (const auto& b : s.bindings) b.target.set_data(bound_value(b, args[b.arg]));
  }
  const at::NoGradGuard no_grad;  // as KernelBench calls a candidate
  py::tuple inputs(s.call.size());
  for (size_t i = 0; i < s.call.size(); ++i) {
    const auto& a = s.call[i];
    inputs[i] = a.input ? py::reinterpret_steal<py::object>(THPVariable_Wrap(args[*a.input])) : a.constant;
  }
  py::object out;
  try {
    out = s.model(*inputs);
  } catch (py::error_already_set& e) {
    throw Error(fmt::format("ModelNew.forward raised {}", describe(e)));
  }
  check_no_modes_left("ModelNew.forward");
  std::vector<at::Tensor> outputs;
  if (py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out)) {
    const auto items = py::reinterpret_borrow<py::sequence>(out);
    for (size_t i = 0; i < items.size(); ++i) outputs.push_back(plain_tensor(items[i], s.tensor_class, i + 1));
  } else {
    outputs.push_back(plain_tensor(out, s.tensor_class, 0));
  }
  return outputs;
}

FixedParams PythonProgram::param_values() const {
  const PythonProgramState& s = *state_;
  FixedParams values;
  for (const auto& b : s.bindings) {
    // bound_value's transform undone: the param as crl holds it, from the module's tensor.
    at::Tensor value = b.target.detach();
    if (b.transform == KernelBenchTransform::reshape) value = value.reshape(b.param_shape);
    if (b.transform == KernelBenchTransform::transpose) value = value.transpose(b.dim0, b.dim1);
    values.emplace_back(b.arg - s.num_inputs, value.contiguous().clone());
  }
  return values;
}

}  // namespace crl::pyprogram
