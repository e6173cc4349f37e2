#include "cli/specs.h"

#include <charconv>

namespace t2o::cli {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> r;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    r.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return r;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> r;
  for (std::string& item : split(s, ','))
    if (!item.empty()) r.push_back(std::move(item));
  return r;
}

namespace {
bool parse_int(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}
[[noreturn]] void usage(const std::string& msg, const std::string& hint) { throw Error(msg, hint, kExitUsage); }
}  // namespace

InputArg parse_input_spec(const std::string& s) {
  const std::string hint = "write --input NAME:DIMS[:DTYPE], e.g. --input image:1x3x224x224 or --input ids:1x16:i64";
  auto parts = split(s, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) usage("--input '" + s + "' is not NAME:DIMS[:DTYPE]", hint);
  InputArg a;
  a.name = parts[0];
  if (parts[1] != "scalar") {
    for (const std::string& d : split(parts[1], 'x')) {
      int64_t v;
      if (!parse_int(d, v) || v < 0) usage("--input '" + s + "': '" + parts[1] + "' is not a list of sizes like 1x3x224x224", hint);
      a.dims.push_back(v);
    }
  }
  if (parts.size() == 3) {
    a.dtype = dtype_from_name(parts[2]);
    if (a.dtype == DType::Undefined || a.dtype == DType::String)
      usage("--input '" + s + "': unknown dtype '" + parts[2] + "'", "use one of f32 f64 f16 i64 i32 i8 u8 bool");
  }
  return a;
}

DynamicArg parse_dynamic_spec(const std::string& s) {
  const std::string hint = "write --dynamic NAME:AXIS=LABEL[,AXIS=LABEL], e.g. --dynamic image:0=batch";
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    usage("--dynamic '" + s + "' is not NAME:AXIS=LABEL", hint);
  DynamicArg d;
  d.input = s.substr(0, colon);
  for (const std::string& item : split(s.substr(colon + 1), ',')) {
    auto eq = item.find('=');
    int64_t axis;
    if (eq == std::string::npos || !parse_int(item.substr(0, eq), axis) || eq + 1 == item.size())
      usage("--dynamic '" + s + "': '" + item + "' is not AXIS=LABEL", hint);
    d.axes.emplace_back(static_cast<int>(axis), item.substr(eq + 1));
  }
  return d;
}

}  // namespace t2o::cli
