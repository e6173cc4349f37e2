#pragma once
// NumPy arrays <-> t2o::Tensor for the Python module, without copies where the layout allows:
// a C-contiguous, aligned array is borrowed as is, and a runtime result is handed to NumPy with
// a capsule that keeps its storage alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "ir/graph.h"
#include "runtime/value.h"

namespace t2o::pyext {

namespace pyb = pybind11;

// str(obj) as a C++ string.
inline std::string text(const pyb::handle& obj) { return pyb::str(obj).cast<std::string>(); }

// The element type of a NumPy dtype; throws a usage Error naming `what` for unsupported ones.
DType dtype_of(const pyb::dtype& dt, const std::string& what);
pyb::dtype numpy_dtype(DType t);
// The ONNX Runtime spelling of a tensor type: "tensor(float)", "tensor(int64)", ...
std::string ort_type_name(const Type& t);

// An array as a tensor. `keep` receives the array actually borrowed (a contiguous copy when the
// given one is strided), which must outlive the tensor. String arrays are copied.
Tensor borrow_array(const pyb::handle& obj, const std::string& what, pyb::object& keep);
// A writable, C-contiguous array of exactly `dtype` as a tensor over its memory (for outputs).
Tensor borrow_writable(pyb::array& a, DType dtype, const std::string& what);
// A tensor as an array sharing its storage (strings become an object array).
pyb::array to_array(const Tensor& t);
pyb::object to_python(const RValue& v);  // tensors as arrays, sequences as lists, None

}  // namespace t2o::pyext
