#pragma once
// t2o::Error carries what a person needs to act: the failing thing, where, and a hint.
#include <stdexcept>
#include <string>

namespace t2o {

// Process exit codes shared by every command (see DESIGN.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitMismatch = 1,
  kExitUsage = 2,
  kExitUnsupported = 3,
  kExitBadInput = 4,
};

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, std::string hint = {}, int exit_code = kExitUnsupported)
      : std::runtime_error(std::move(message)), hint_(std::move(hint)), exit_code_(exit_code) {}
  const std::string& hint() const { return hint_; }
  int exit_code() const { return exit_code_; }

 private:
  std::string hint_;
  int exit_code_;
};

// An input file that cannot be read or is not a valid model/tensor.
class InputError : public Error {
 public:
  explicit InputError(std::string message, std::string hint = {})
      : Error(std::move(message), std::move(hint), kExitBadInput) {}
};

}  // namespace t2o
