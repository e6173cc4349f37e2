#pragma once
// The native module torch2onnx._torch2onnx: one init function per binding file.
#include <pybind11/pybind11.h>

namespace t2o::pyext {

void init_session(pybind11::module_& m);  // session.cpp: Session, IOBinding, load_plugin
void init_convert(pybind11::module_& m);  // convert.cpp: convert, verify, optimize, the Triton bundle
void init_quantize(pybind11::module_& m);  // quantize.cpp: quantize_file, QuantizeOptions

}  // namespace t2o::pyext
