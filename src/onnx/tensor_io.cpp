#include "onnx/tensor_io.h"

#include <onnx/onnx-data.pb.h>
#include <onnx/onnx_pb.h>

#include <charconv>
#include <cstring>
#include <filesystem>

#include "onnx/model_io.h"

namespace t2o {

namespace {

struct NpyCode {
  DType t;
  const char* code;
};
constexpr NpyCode kNpy[] = {
    {DType::Float, "f4"}, {DType::Double, "f8"}, {DType::Float16, "f2"}, {DType::Int8, "i1"},
    {DType::Int16, "i2"}, {DType::Int32, "i4"},  {DType::Int64, "i8"},   {DType::UInt8, "u1"},
    {DType::UInt16, "u2"}, {DType::UInt32, "u4"}, {DType::UInt64, "u8"}, {DType::Bool, "b1"},
    {DType::Complex64, "c8"}, {DType::Complex128, "c16"},
};

std::string dict_value(const std::string& header, const std::string& key) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return {};
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  if (i >= header.size()) return {};
  if (header[i] == '\'') {
    auto end = header.find('\'', i + 1);
    return header.substr(i + 1, end - i - 1);
  }
  if (header[i] == '(') {
    auto end = header.find(')', i);
    return header.substr(i, end - i + 1);
  }
  auto end = header.find_first_of(",}", i);
  return header.substr(i, end - i);
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::string bytes = read_file(path, "tensor file");
  auto bad = [&](const std::string& why) { return InputError("'" + path + "' is not a valid .npy file: " + why); };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("missing the \\x93NUMPY magic");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen, hstart;
  if (major != 1 && major != 2 && major != 3) throw bad("unknown format version " + std::to_string(major));
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    hstart = 10;
  } else {
    if (bytes.size() < 12) throw bad("truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    hstart = 12;
  }
  if (hstart + hlen > bytes.size()) throw bad("truncated header");
  std::string header = bytes.substr(hstart, hlen);
  std::string descr = dict_value(header, "descr");
  std::string fortran = dict_value(header, "fortran_order");
  std::string shape = dict_value(header, "shape");
  if (descr.size() < 3) throw bad("no dtype in header");
  if (fortran.find("True") != std::string::npos) throw bad("Fortran-ordered arrays are not supported; save with np.ascontiguousarray");
  char order = descr[0];
  std::string code = descr.substr(1);
  if (order == '>' && code != "i1" && code != "u1" && code != "b1") throw bad("big-endian data is not supported");
  DType dt = DType::Undefined;
  for (const auto& e : kNpy)
    if (code == e.code) dt = e.t;
  if (dt == DType::Undefined) throw bad("unsupported dtype '" + descr + "'");
  Dims dims;
  if (shape.size() < 2 || shape.front() != '(') throw bad("no shape in header");
  std::string inner = shape.substr(1, shape.size() - 2);
  size_t i = 0;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i >= inner.size()) break;
    size_t j = i;
    while (j < inner.size() && std::isdigit(static_cast<unsigned char>(inner[j]))) ++j;
    if (j == i) throw bad("malformed shape " + shape);
    int64_t d = -1;
    auto [end, ec] = std::from_chars(inner.data() + i, inner.data() + j, d);
    if (ec != std::errc() || end != inner.data() + j) throw bad("dimension out of range in shape " + shape);
    dims.push_back(d);
    i = j;
  }
  size_t want;
  try {
    want = nbytes_of(dt, dims);
  } catch (const Error& e) {
    throw bad(e.what());
  }
  // The data is checked against the shape before the tensor is allocated.
  size_t data_start = hstart + hlen;
  if (bytes.size() - data_start < want)
    throw bad("data is truncated (" + std::to_string(bytes.size() - data_start) + " bytes, need " +
              std::to_string(want) + ")");
  Tensor t = Tensor::uninitialized(dt, dims);
  if (want) std::memcpy(t.raw(), bytes.data() + data_start, want);
  if (dt == DType::Bool) {  // bytes other than 0 and 1 are not bools
    auto* p = static_cast<uint8_t*>(t.raw());
    for (size_t k = 0; k < want; ++k) p[k] = p[k] != 0;
  }
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* code = nullptr;
  for (const auto& e : kNpy)
    if (e.t == t.dtype()) code = e.code;
  if (!code) throw Error("cannot write " + std::string(dtype_name(t.dtype())) + " tensors as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.dims().size(); ++i) shape += std::to_string(t.dims()[i]) + (t.dims().size() == 1 ? "," : i + 1 < t.dims().size() ? ", " : "");
  shape += ")";
  char order = (t.dtype() == DType::Int8 || t.dtype() == DType::UInt8 || t.dtype() == DType::Bool) ? '|' : '<';
  std::string header = "{'descr': '" + std::string(1, order) + code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  write_file_atomic(path, out);
}

Tensor read_tensor_pb(const std::string& path, std::string* name) {
  std::string bytes = read_file(path, "tensor file");
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes) || !tp.has_data_type())
    throw InputError("'" + path + "' is not a valid ONNX TensorProto file");
  if (name) *name = tp.name();
  auto parent = std::filesystem::path(path).parent_path();
  try {
    return tensor_from_proto(tp, parent.empty() ? "." : parent.string());
  } catch (const InputError& e) {
    throw InputError("'" + path + "': " + e.what(), e.hint());
  }
}

void write_tensor_pb(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto tp;
  tensor_to_proto(t, tp);
  if (!name.empty()) tp.set_name(name);
  write_file_atomic(path, tp.SerializeAsString());
}

Tensor read_tensor_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".npy") return read_npy(path);
  if (ext == ".pb") return read_tensor_pb(path);
  throw InputError("'" + path + "': unknown tensor file type '" + ext + "'", "use a .npy or .pb file");
}

namespace {

// External data of a tensor in a .pb file is relative to that file's folder.
std::string folder_of(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void sequence_from_proto(const onnx::SequenceProto& sp, PbValue& v, const std::string& path) {
  v.kind = PbValue::Kind::Sequence;
  v.seq_elem = DType::Undefined;
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.elem_type() != onnx::SequenceProto::UNDEFINED)
    throw InputError("'" + path + "': only sequences of tensors are supported");
  for (const auto& t : sp.tensor_values()) {
    v.sequence.push_back(tensor_from_proto(t, folder_of(path)));
    if (v.sequence.back().dtype() != v.sequence.front().dtype())
      throw InputError("'" + path + "': the tensors of the sequence have different element types");
  }
  if (!v.sequence.empty()) v.seq_elem = v.sequence.front().dtype();
}

PbValue parse_value_pb(const std::string& path, const std::string& hint) {
  std::string bytes = read_file(path, "tensor file");
  PbValue v;
  if (hint == "sequence") {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes)) throw InputError("'" + path + "' is not a valid SequenceProto file");
    sequence_from_proto(sp, v, path);
    return v;
  }
  if (hint == "optional") {
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes)) throw InputError("'" + path + "' is not a valid OptionalProto file");
    v.kind = PbValue::Kind::Optional;
    if (op.has_tensor_value()) {
      v.optional_elem_kind = PbValue::Kind::Tensor;
      v.tensor = tensor_from_proto(op.tensor_value(), folder_of(path));
    } else if (op.has_sequence_value()) {
      v.optional_elem_kind = PbValue::Kind::Sequence;
      PbValue s;
      sequence_from_proto(op.sequence_value(), s, path);
      v.sequence = std::move(s.sequence);
      v.seq_elem = s.seq_elem;
    } else {
      v.has_value = false;
    }
    return v;
  }
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes)) throw InputError("'" + path + "' is not a valid ONNX TensorProto file");
  v.tensor = tensor_from_proto(tp, folder_of(path));
  return v;
}

}  // namespace

PbValue read_value_pb(const std::string& path, const std::string& hint) {
  try {
    return parse_value_pb(path, hint);
  } catch (const InputError& e) {
    std::string msg = e.what();
    if (msg.find("'" + path + "'") != std::string::npos) throw;
    throw InputError("'" + path + "': " + msg, e.hint());
  }
}

void write_value_pb(const std::string& path, const PbValue& v, const std::string& name) {
  std::string bytes;
  auto seq_to = [&](onnx::SequenceProto& sp) {
    sp.set_elem_type(onnx::SequenceProto::TENSOR);
    for (const Tensor& t : v.sequence) tensor_to_proto(t, *sp.add_tensor_values());
  };
  if (v.kind == PbValue::Kind::Tensor) {
    onnx::TensorProto tp;
    tensor_to_proto(v.tensor, tp);
    if (!name.empty()) tp.set_name(name);
    bytes = tp.SerializeAsString();
  } else if (v.kind == PbValue::Kind::Sequence) {
    onnx::SequenceProto sp;
    if (!name.empty()) sp.set_name(name);
    seq_to(sp);
    bytes = sp.SerializeAsString();
  } else {
    onnx::OptionalProto op;
    if (!name.empty()) op.set_name(name);
    if (v.has_value && v.optional_elem_kind == PbValue::Kind::Tensor) {
      op.set_elem_type(onnx::OptionalProto::TENSOR);
      tensor_to_proto(v.tensor, *op.mutable_tensor_value());
    } else if (v.has_value) {
      op.set_elem_type(onnx::OptionalProto::SEQUENCE);
      seq_to(*op.mutable_sequence_value());
    }
    bytes = op.SerializeAsString();
  }
  write_file_atomic(path, bytes);
}

}  // namespace t2o
