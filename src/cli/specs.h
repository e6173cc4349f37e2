#pragma once
// Parsing of the --input and --dynamic specs shared by convert and verify.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace t2o::cli {

struct InputArg {
  std::string name;
  Dims dims;
  DType dtype = DType::Float;
};
struct DynamicArg {
  std::string input;
  std::vector<std::pair<int, std::string>> axes;
};

// NAME:DIMS[:DTYPE], e.g. "image:1x3x224x224" or "tokens:1x128:i64". Throws a usage Error.
InputArg parse_input_spec(const std::string& s);
// NAME:AXIS=LABEL[,AXIS=LABEL], e.g. "image:0=batch" or "tokens:0=batch,1=seq".
DynamicArg parse_dynamic_spec(const std::string& s);
std::vector<std::string> split(const std::string& s, char sep);
// A comma-separated list as users type it: empty items ("a,,b", a trailing comma) are dropped.
std::vector<std::string> split_list(const std::string& s);

}  // namespace t2o::cli
