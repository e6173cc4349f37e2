// The version of an installed torch2onnx library (torch2onnx_runtime_version(),
// torch2onnx_converter_version()), for programs that check what they loaded.
extern "C" const char* T2O_VERSION_FN() { return T2O_VERSION; }
