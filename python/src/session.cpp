// torch2onnx.InferenceSession and its I/O binding, shaped like onnxruntime's so that code written
// for one runs on the other: run(output_names, feeds), get_inputs()/get_outputs(), io_binding().
#include <pybind11/stl.h>

#include <memory>

#include "arrays.h"
#include "module.h"
#include "onnx/model_io.h"
#include "runtime/plugin.h"
#include "runtime/session.h"

namespace t2o::pyext {

namespace {

// What get_inputs()/get_outputs() return: name, type ("tensor(float)") and shape, where a dim is
// an int, a symbol (str) or None (unknown), as in onnxruntime.
struct NodeArg {
  std::string name, type;
  pyb::list shape;
};

NodeArg node_arg(const ValueInfo& vi) {
  NodeArg a{vi.name, ort_type_name(vi.type), pyb::list()};
  if (vi.type.shape)
    for (const Dim& d : vi.type.shape->dims) {
      if (d.is_static()) a.shape.append(d.value);
      else if (d.is_symbolic()) a.shape.append(d.symbol);
      else a.shape.append(pyb::none());
    }
  return a;
}

class PySession;

// Inputs and outputs bound once and reused by every run_with_iobinding: bound output arrays are
// written in place, so a steady loop allocates nothing after its first run.
class IoBinding {
 public:
  explicit IoBinding(std::shared_ptr<Session> s) : s_(std::move(s)) {}
  const Session* session() const { return s_.get(); }

  void bind_input(const std::string& name, const pyb::handle& value) {
    const ValueInfo* vi = find(s_->inputs(), name, "input");
    pyb::object keep;
    Tensor t = borrow_array(value, "input '" + vi->name + "'", keep);
    inputs_[name] = {keep, t};
  }

  // `target`: an array to write into, a shape to allocate one of, or None for an output the
  // runtime allocates at each run.
  void bind_output(const std::string& name, const pyb::object& target) {
    const ValueInfo* vi = find(s_->outputs(), name, "output");
    Bound b;
    if (!target.is_none()) {
      if (vi->type.kind != Type::Kind::Tensor || vi->type.elem == DType::Undefined)
        throw Error("output '" + name + "' has no known tensor type to bind a buffer to", {}, kExitUsage);
      pyb::array arr;
      if (pyb::isinstance<pyb::array>(target)) {
        arr = pyb::reinterpret_borrow<pyb::array>(target);
      } else {
        std::vector<pyb::ssize_t> shape;
        for (const pyb::handle& d : target) shape.push_back(d.cast<pyb::ssize_t>());
        arr = pyb::array(numpy_dtype(vi->type.elem), shape);
      }
      b.tensor = borrow_writable(arr, vi->type.elem, "the array bound to output '" + name + "'");
      b.array = arr;
    }
    if (!outputs_.count(name)) order_.push_back(name);
    outputs_[name] = b;
  }

  void clear_inputs() { inputs_.clear(); }
  void clear_outputs() {
    outputs_.clear();
    order_.clear();
  }

  void run() {
    std::map<std::string, RValue> feeds;
    for (const auto& [name, in] : inputs_) feeds[name] = in.tensor;
    std::map<std::string, Tensor> into;
    for (const auto& [name, b] : outputs_)
      if (b.tensor.defined()) into[name] = b.tensor;
    std::map<std::string, RValue> out;
    {
      pyb::gil_scoped_release unlocked;
      out = s_->run(feeds, into);
    }
    for (auto& [name, b] : outputs_)
      if (!b.tensor.defined()) b.result = to_python(out.at(name));
  }

  // The outputs in the order they were bound: the bound arrays themselves, or what the last run
  // allocated for outputs bound without a buffer.
  pyb::list get_outputs() const {
    pyb::list l;
    for (const auto& name : order_) {
      const Bound& b = outputs_.at(name);
      l.append(b.tensor.defined() ? pyb::object(b.array) : b.result);
    }
    return l;
  }

 private:
  struct Input {
    pyb::object keep;
    Tensor tensor;
  };
  struct Bound {
    Tensor tensor;  // over `array`, undefined for runtime-allocated outputs
    pyb::array array;
    pyb::object result = pyb::none();
  };
  static const ValueInfo* find(const std::vector<ValueInfo>& list, const std::string& name, const char* what) {
    for (const ValueInfo& vi : list)
      if (vi.name == name) return &vi;
    std::string names;
    for (const ValueInfo& vi : list) names += (names.empty() ? "" : ", ") + vi.name;
    throw Error("the model has no " + std::string(what) + " named '" + name + "'", "its " + std::string(what) +
                "s are: " + names, kExitUsage);
  }
  std::shared_ptr<Session> s_;
  std::map<std::string, Input> inputs_;
  std::map<std::string, Bound> outputs_;
  std::vector<std::string> order_;
};

class PySession {
 public:
  PySession(const pyb::object& model, const pyb::object& threads, bool fast_paths) {
    SessionOptions o;
    o.threads = threads.is_none() ? 0 : threads.cast<int>();
    o.fast_paths = fast_paths;
    Model m;
    if (pyb::isinstance<pyb::bytes>(model)) {
      m = load_model_from_bytes(std::string(pyb::bytes(model)));
    } else {
      std::string path = pyb::str(model);
      pyb::gil_scoped_release unlocked;
      m = load_model(path);
    }
    pyb::gil_scoped_release unlocked;
    s_ = std::make_shared<Session>(std::move(m), o);
  }

  std::vector<NodeArg> inputs() const {
    std::vector<NodeArg> r;
    for (const ValueInfo& vi : s_->inputs()) r.push_back(node_arg(vi));
    return r;
  }
  std::vector<NodeArg> outputs() const {
    std::vector<NodeArg> r;
    for (const ValueInfo& vi : s_->outputs()) r.push_back(node_arg(vi));
    return r;
  }

  pyb::list run(const pyb::object& output_names, const pyb::dict& feeds) {
    std::vector<pyb::object> keep;
    std::map<std::string, RValue> in;
    for (const auto& [k, v] : feeds) {
      std::string name = pyb::str(k);
      pyb::object hold;
      if (pyb::isinstance<pyb::list>(v)) {  // a sequence input
        std::vector<Tensor> seq;
        for (const pyb::handle& e : v) {
          pyb::object h;
          seq.push_back(borrow_array(e, "input '" + name + "'", h));
          keep.push_back(h);
        }
        in[name] = RValue::make_sequence(std::move(seq));
        continue;
      }
      in[name] = borrow_array(v, "input '" + name + "'", hold);
      keep.push_back(hold);
    }
    std::vector<std::string> names;
    if (output_names.is_none()) {
      for (const ValueInfo& vi : s_->outputs()) names.push_back(vi.name);
    } else {
      names = output_names.cast<std::vector<std::string>>();
      for (const auto& n : names) {
        bool known = false;
        for (const ValueInfo& vi : s_->outputs()) known = known || vi.name == n;
        if (!known) throw Error("the model has no output named '" + n + "'", {}, kExitUsage);
      }
    }
    std::map<std::string, RValue> out;
    {
      pyb::gil_scoped_release unlocked;
      out = s_->run(in);
    }
    pyb::list r;
    for (const auto& n : names) r.append(to_python(out.at(n)));
    return r;
  }

  IoBinding io_binding() const { return IoBinding(s_); }
  void run_with_iobinding(IoBinding& b) {
    if (b.session() != s_.get())
      throw Error("this I/O binding belongs to another session", "bind with this session's io_binding()", kExitUsage);
    b.run();
  }
  size_t fresh_buffers() const { return s_->fresh_buffers(); }

 private:
  std::shared_ptr<Session> s_;
};

}  // namespace

void init_session(pyb::module_& m) {
  pyb::class_<NodeArg>(m, "NodeArg")
      .def_readonly("name", &NodeArg::name)
      .def_readonly("type", &NodeArg::type)
      .def_readonly("shape", &NodeArg::shape)
      .def("__repr__", [](const NodeArg& a) {
        return "NodeArg(name='" + a.name + "', type='" + a.type + "', shape=" + std::string(pyb::repr(a.shape)) + ")";
      });

  pyb::class_<IoBinding>(m, "IOBinding")
      .def("bind_input", &IoBinding::bind_input, pyb::arg("name"), pyb::arg("array"),
           "Binds a NumPy array to an input (borrowed, not copied, when C-contiguous).")
      .def("bind_cpu_input", &IoBinding::bind_input, pyb::arg("name"), pyb::arg("array"))
      .def("bind_output", &IoBinding::bind_output, pyb::arg("name"), pyb::arg("array_or_shape") = pyb::none(),
           "Binds an output to a writable array (or a shape: an array of it is allocated once); with None the "
           "runtime allocates the output at each run.")
      .def("clear_binding_inputs", &IoBinding::clear_inputs)
      .def("clear_binding_outputs", &IoBinding::clear_outputs)
      .def("get_outputs", &IoBinding::get_outputs, "The outputs in bind order; bound arrays are returned as is.")
      .def("copy_outputs_to_cpu", [](const IoBinding& b) {
        pyb::list l;
        for (const pyb::handle& a : b.get_outputs()) l.append(a.attr("copy")());
        return l;
      });

  pyb::class_<PySession>(m, "Session")
      .def(pyb::init<const pyb::object&, const pyb::object&, bool>(), pyb::arg("model"),
           pyb::arg("threads") = pyb::none(), pyb::arg("fast_paths") = true)
      .def("get_inputs", &PySession::inputs)
      .def("get_outputs", &PySession::outputs)
      .def("run", &PySession::run, pyb::arg("output_names"), pyb::arg("input_feed"))
      .def("io_binding", &PySession::io_binding)
      .def("run_with_iobinding", &PySession::run_with_iobinding, pyb::arg("iobinding"))
      .def_property_readonly("fresh_buffers", &PySession::fresh_buffers);

  m.def("load_plugin", [](const std::string& path) {
    std::vector<std::string> ops;
    for (const PluginOp& op : load_plugin(path)) ops.push_back((op.domain.empty() ? "" : op.domain + "::") + op.op_type);
    return ops;
  }, pyb::arg("path"), "Loads a runtime plugin (.so) and returns the DOMAIN::OP kernels it registered.");
}

}  // namespace t2o::pyext
