// torch2onnx._torch2onnx: the C++ libraries (converter, verifier, runtime) for the Python package.
// Errors reach Python as torch2onnx.Error subclasses carrying the CLI's exit code and hint.
#include "module.h"

#include <new>

#include "ir/error.h"

namespace {

void raise(int code, const std::string& message, const std::string& hint) {
  namespace pyb = pybind11;
  pyb::object make = pyb::module_::import("torch2onnx._errors").attr("from_native");
  pyb::object exc = make(code, message, hint);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

}  // namespace

PYBIND11_MODULE(_torch2onnx, m) {
  m.doc() = "Native part of torch2onnx: the TorchScript -> ONNX converter, verifier and CPU runtime.";
  m.attr("__version__") = T2O_VERSION;
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const t2o::Error& e) {
      raise(e.exit_code(), e.what(), e.hint());
    } catch (const std::bad_alloc&) {
      raise(t2o::kExitUnsupported, "out of memory", "");
    }
  });
  t2o::pyext::init_session(m);
  t2o::pyext::init_convert(m);
  t2o::pyext::init_quantize(m);
}
