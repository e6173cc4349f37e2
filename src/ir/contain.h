#pragma once
// Running a library call that may crash on malformed input (onnx's checker, libtorch's
// TorchScript importer) in a forked child, so that its crash becomes an error line and exit 4.
#include <functional>
#include <string>

namespace t2o {

// Runs `f` in a forked child and returns the bytes it returns. An Error `f` throws is thrown here
// with its message, hint and exit code; another exception becomes an Error (exit 3). When the
// child dies by a signal, runs past `timeout_seconds` or exits otherwise, throws
// InputError(what(how), hint), `how` being "crashed (signal 11)", "ran past 300 s" or "failed
// (exit 1)". When no child can be started, runs `f` here.
std::string run_contained(const std::function<std::string()>& f, int timeout_seconds,
                          const std::function<std::string(const std::string& how)>& what, const std::string& hint);

}  // namespace t2o
