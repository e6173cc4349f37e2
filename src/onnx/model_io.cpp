#include "onnx/model_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace fs = std::filesystem;

namespace t2o {

namespace {

// Opens a file for reading without blocking (a FIFO or device would hang a plain open or read)
// and insists on a regular file. `no_follow` also refuses a symlink as the last component.
int open_regular(const std::string& path, const std::string& what, bool no_follow, struct stat& st) {
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (no_follow ? O_NOFOLLOW : 0);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) throw InputError(what + " '" + path + "' does not exist");
    if (err == ELOOP) throw InputError(what + " '" + path + "' is a symbolic link, which is not followed here");
    throw InputError("cannot open " + what + " '" + path + "': " + std::strerror(err));
  }
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw InputError("cannot read " + what + " '" + path + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError(what + " '" + path + "' is a directory, not a file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(what + " '" + path + "' is not a regular file (a pipe, socket or device)");
  }
  return fd;
}

// Reads exactly n bytes at offset; false when the file ends first.
bool pread_all(int fd, char* dst, size_t n, off_t offset) {
  while (n) {
    ssize_t got = ::pread(fd, dst, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return true;
}

struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

std::string read_file(const std::string& path, const std::string& what) {
  struct stat st;
  Fd f{open_regular(path, what, false, st)};
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  if (!pread_all(f.fd, bytes.data(), bytes.size(), 0))
    throw InputError("cannot read " + what + " '" + path + "': it changed or is unreadable");
  return bytes;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("output folder '" + dir.string() + "' does not exist", {}, kExitUsage);
  std::random_device rd;
  // Built piecewise: GCC 12 warns falsely (-Wstringop-overflow) on "." + std::string&&.
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp";
  tmp_name += std::to_string(rd());
  fs::path tmp = dir / tmp_name;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + tmp.string() + "'", "check that the output folder is writable", kExitUsage);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      throw Error("failed writing '" + path + "' (disk full?)", {}, kExitUsage);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot replace '" + path + "': " + ec.message(), {}, kExitUsage);
  }
}

// ---------------- tensors ----------------
namespace {

template <typename T, typename Field>
void copy_field(const Field& f, Tensor& t) {
  T* p = static_cast<T*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(f.Get(static_cast<int>(i)));
}

// How many values the typed field for `dt` holds (complex: floats or doubles, two per element).
int64_t typed_count(const onnx::TensorProto& tp, DType dt) {
  switch (dt) {
    case DType::Float: case DType::Complex64: return tp.float_data_size();
    case DType::Double: case DType::Complex128: return tp.double_data_size();
    case DType::Int64: return tp.int64_data_size();
    case DType::UInt32: case DType::UInt64: return tp.uint64_data_size();
    case DType::String: return tp.string_data_size();
    default: return tp.int32_data_size();
  }
}

// The counts were checked against the dims before `t` was allocated.
void fill_from_typed_fields(const onnx::TensorProto& tp, Tensor& t) {
  int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::Float: copy_field<float>(tp.float_data(), t); break;
    case DType::Double: copy_field<double>(tp.double_data(), t); break;
    case DType::Int64: copy_field<int64_t>(tp.int64_data(), t); break;
    case DType::UInt32: copy_field<uint32_t>(tp.uint64_data(), t); break;
    case DType::UInt64: copy_field<uint64_t>(tp.uint64_data(), t); break;
    case DType::Int32: copy_field<int32_t>(tp.int32_data(), t); break;
    case DType::Int16: copy_field<int16_t>(tp.int32_data(), t); break;
    case DType::Int8: copy_field<int8_t>(tp.int32_data(), t); break;
    case DType::UInt16: copy_field<uint16_t>(tp.int32_data(), t); break;
    case DType::UInt8: copy_field<uint8_t>(tp.int32_data(), t); break;
    case DType::Bool: {
      bool* p = t.data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = tp.int32_data(static_cast<int>(i)) != 0;
      break;
    }
    case DType::Float16: case DType::BFloat16: copy_field<uint16_t>(tp.int32_data(), t); break;
    case DType::Complex64: {
      float* p = static_cast<float*>(t.raw());
      for (int64_t i = 0; i < 2 * n; ++i) p[i] = tp.float_data(static_cast<int>(i));
      break;
    }
    case DType::Complex128: {
      double* p = static_cast<double*>(t.raw());
      for (int64_t i = 0; i < 2 * n; ++i) p[i] = tp.double_data(static_cast<int>(i));
      break;
    }
    case DType::String:
      for (int64_t i = 0; i < n; ++i) t.strings()[i] = tp.string_data(static_cast<int>(i));
      break;
    default: break;
  }
}

int64_t parse_size(const std::string& v, const std::string& key, const std::string& tensor) {
  int64_t x = -1;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 0)
    throw InputError("tensor '" + tensor + "' has an invalid external data " + key + " '" + v + "'");
  return x;
}

// External data must stay inside the model's folder: the location is resolved (symlinks
// included) and must land in the resolved folder, and the file must be a regular file, read
// without blocking. A location that escapes through `..`, an absolute path or a symlink, or that
// names a FIFO or device, is refused.
std::string read_external(const onnx::TensorProto& tp, const std::string& base_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_size(kv.value(), "offset", tp.name());
    else if (kv.key() == "length") length = parse_size(kv.value(), "length", tp.name());
  }
  const std::string& name = tp.name();
  if (location.empty()) throw InputError("tensor '" + name + "' is stored externally but names no location");
  auto outside = [&] {
    return InputError("tensor '" + name + "' points outside the model folder: '" + location + "'",
                      "external data files must be inside the model's folder (no '..', absolute paths or symlinks out of it)");
  };
  if (location.find('\0') != std::string::npos || fs::path(location).is_absolute() || location.find("..") != std::string::npos)
    throw outside();
  std::error_code ec;
  fs::path base = fs::canonical(base_dir.empty() ? "." : base_dir, ec);
  if (ec) throw InputError("model folder '" + base_dir + "' cannot be resolved: " + ec.message());
  fs::path given = base / location;
  fs::path file = fs::canonical(given, ec);
  if (ec)
    throw InputError("external data file '" + given.string() + "' of tensor '" + name + "' cannot be opened: " + ec.message(),
                     "keep the .data file next to the .onnx file");
  fs::path rel = file.lexically_relative(base);
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute()) throw outside();
  struct stat st;
  Fd f{open_regular(file.string(), "external data file", true, st)};
  if (length < 0) length = static_cast<int64_t>(want);
  if (static_cast<size_t>(length) != want)
    throw InputError("external data of tensor '" + name + "' has " + std::to_string(length) +
                     " bytes, its dims need " + std::to_string(want));
  // Checked against the file's size before anything is allocated.
  if (offset > st.st_size || length > st.st_size - offset)
    throw InputError("external data file '" + given.string() + "' is too short for tensor '" + name + "' (" +
                     std::to_string(st.st_size) + " bytes, need " + std::to_string(length) + " at offset " +
                     std::to_string(offset) + ")");
  std::string buf(static_cast<size_t>(length), '\0');
  if (!pread_all(f.fd, buf.data(), buf.size(), static_cast<off_t>(offset)))
    throw InputError("external data file '" + given.string() + "' is too short for tensor '" + name + "'");
  return buf;
}

// Bytes other than 0 and 1 are not bools: reading one as bool is undefined. Files get them
// normalised (nonzero is true) as they are read.
void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::Bool) return;
  auto* p = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = p[i] != 0;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& tp, const std::string& base_dir) {
  const std::string& name = tp.name();
  if (!dtype_is_valid(tp.data_type()))
    throw InputError("tensor '" + name + "' has unknown data type " + std::to_string(tp.data_type()));
  if (tp.has_segment()) throw InputError("tensor '" + name + "' uses segments, which are not supported");
  DType dt = static_cast<DType>(tp.data_type());
  Dims dims(tp.dims().begin(), tp.dims().end());
  for (int64_t d : dims)
    if (d < 0) throw InputError("tensor '" + name + "' has a negative dimension");
  int64_t n;
  size_t want;
  try {
    n = numel_of(dims);
    want = dt == DType::String ? 0 : nbytes_of(dt, dims);
  } catch (const Error& e) {
    throw InputError("tensor '" + name + "': " + e.what(), e.hint());
  }
  // The payload is checked against the dims first, so a few bytes that declare a huge tensor
  // fail here instead of allocating it. Complex values are pairs; Tensor keeps them as raw bytes.
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    if (dt == DType::String) throw InputError("tensor '" + name + "' holds strings, which cannot be external data");
    std::string buf = read_external(tp, base_dir, want);
    Tensor t = Tensor::uninitialized_long_lived(dt, dims);
    if (want) std::memcpy(t.raw(), buf.data(), want);
    normalize_bools(t);
    return t;
  }
  if (tp.has_raw_data() && dt != DType::String) {
    if (tp.raw_data().size() != want)
      throw InputError("tensor '" + name + "' has " + std::to_string(tp.raw_data().size()) +
                       " bytes of raw data, its dims " + dims_to_string(dims) + " need " + std::to_string(want));
    Tensor t = Tensor::uninitialized_long_lived(dt, dims);
    if (want) std::memcpy(t.raw(), tp.raw_data().data(), want);
    normalize_bools(t);
    return t;
  }
  bool complex = dt == DType::Complex64 || dt == DType::Complex128;
  int64_t have = typed_count(tp, dt), need = complex ? 2 * n : n;
  if (have != need)
    throw InputError("tensor '" + name + "' holds " + std::to_string(complex ? have / 2 : have) + " values but its dims " +
                     dims_to_string(dims) + " need " + std::to_string(n));
  Tensor t(dt, dims);
  fill_from_typed_fields(tp, t);
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& tp) {
  tp.set_data_type(static_cast<int32_t>(t.dtype()));
  tp.clear_dims();
  for (int64_t d : t.dims()) tp.add_dims(d);
  if (t.dtype() == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i) tp.add_string_data(t.strings()[i]);
  } else {
    if (t.nbytes()) tp.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  }
}

// ---------------- types ----------------
namespace {

Type type_from_proto(const onnx::TypeProto& p) {
  Type t;
  t.denotation = p.denotation();
  auto read_shape = [](const onnx::TypeProto::Tensor& tt, Type& out) {
    if (!tt.has_shape()) return;
    Shape s;
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value() && d.dim_value() >= 0) dim.value = d.dim_value();  // a negative one is unknown
      else if (d.has_dim_param()) dim.symbol = d.dim_param();
      dim.denotation = d.denotation();
      s.dims.push_back(dim);
    }
    out.shape = std::move(s);
  };
  switch (p.value_case()) {
    case onnx::TypeProto::kTensorType:
      t.kind = Type::Kind::Tensor;
      t.elem = static_cast<DType>(p.tensor_type().elem_type());
      read_shape(p.tensor_type(), t);
      break;
    case onnx::TypeProto::kSparseTensorType: {
      t.kind = Type::Kind::SparseTensor;
      const auto& st = p.sparse_tensor_type();
      t.elem = static_cast<DType>(st.elem_type());
      if (st.has_shape()) {
        onnx::TypeProto::Tensor tmp;
        *tmp.mutable_shape() = st.shape();
        read_shape(tmp, t);
      }
      break;
    }
    case onnx::TypeProto::kSequenceType:
      t.kind = Type::Kind::Sequence;
      if (p.sequence_type().has_elem_type())
        t.inner = std::make_shared<Type>(type_from_proto(p.sequence_type().elem_type()));
      break;
    case onnx::TypeProto::kOptionalType:
      t.kind = Type::Kind::Optional;
      if (p.optional_type().has_elem_type())
        t.inner = std::make_shared<Type>(type_from_proto(p.optional_type().elem_type()));
      break;
    case onnx::TypeProto::kMapType:
      t.kind = Type::Kind::Map;
      t.elem = static_cast<DType>(p.map_type().key_type());
      if (p.map_type().has_value_type())
        t.inner = std::make_shared<Type>(type_from_proto(p.map_type().value_type()));
      break;
    default: break;
  }
  return t;
}

void shape_to_proto(const Shape& s, onnx::TensorShapeProto* sp) {
  for (const Dim& d : s.dims) {
    auto* pd = sp->add_dim();
    if (d.value >= 0) pd->set_dim_value(d.value);
    else if (!d.symbol.empty()) pd->set_dim_param(d.symbol);
    if (!d.denotation.empty()) pd->set_denotation(d.denotation);
  }
}

void type_to_proto(const Type& t, onnx::TypeProto* p) {
  if (!t.denotation.empty()) p->set_denotation(t.denotation);
  switch (t.kind) {
    case Type::Kind::Tensor: {
      auto* tt = p->mutable_tensor_type();
      tt->set_elem_type(static_cast<int32_t>(t.elem));
      if (t.shape) shape_to_proto(*t.shape, tt->mutable_shape());
      break;
    }
    case Type::Kind::SparseTensor: {
      auto* st = p->mutable_sparse_tensor_type();
      st->set_elem_type(static_cast<int32_t>(t.elem));
      if (t.shape) shape_to_proto(*t.shape, st->mutable_shape());
      break;
    }
    case Type::Kind::Sequence: {
      auto* sq = p->mutable_sequence_type();
      if (t.inner) type_to_proto(*t.inner, sq->mutable_elem_type());
      break;
    }
    case Type::Kind::Optional: {
      auto* op = p->mutable_optional_type();
      if (t.inner) type_to_proto(*t.inner, op->mutable_elem_type());
      break;
    }
    case Type::Kind::Map: {
      auto* mp = p->mutable_map_type();
      mp->set_key_type(static_cast<int32_t>(t.elem));
      if (t.inner) type_to_proto(*t.inner, mp->mutable_value_type());
      break;
    }
    default: break;
  }
}

ValueInfo value_info_from_proto(const onnx::ValueInfoProto& p) {
  ValueInfo v;
  v.name = p.name();
  v.doc_string = p.doc_string();
  if (p.has_type()) v.type = type_from_proto(p.type());
  return v;
}

void value_info_to_proto(const ValueInfo& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  if (!v.doc_string.empty()) p->set_doc_string(v.doc_string);
  if (v.type.kind != Type::Kind::Undefined || !v.type.denotation.empty()) type_to_proto(v.type, p->mutable_type());
}

// ---------------- graphs ----------------
struct Reader {
  std::string base_dir;
  // Frees each initializer's bytes in the proto once copied out (the caller's proto is
  // scratch): loading then holds the weights about once instead of twice.
  bool release = false;

  SparseTensor sparse(const onnx::SparseTensorProto& p) {
    SparseTensor s;
    s.values = tensor_from_proto(p.values(), base_dir);
    s.name = p.values().name();
    if (p.has_indices()) s.indices = tensor_from_proto(p.indices(), base_dir);
    s.dims.assign(p.dims().begin(), p.dims().end());
    return s;
  }

  Attribute attr(const onnx::AttributeProto& p) {
    Attribute a;
    a.name = p.name();
    a.type = static_cast<AttrType>(p.type());
    a.doc_string = p.doc_string();
    a.ref_attr_name = p.ref_attr_name();
    a.f = p.f();
    a.i = p.i();
    a.s = p.s();
    if (p.has_t()) a.t = tensor_from_proto(p.t(), base_dir);
    if (p.has_g()) a.g = std::make_shared<Graph>(graph(p.g()));
    if (p.has_sparse_tensor()) a.sparse = sparse(p.sparse_tensor());
    if (p.has_tp()) a.tp = type_from_proto(p.tp());
    a.floats.assign(p.floats().begin(), p.floats().end());
    a.ints.assign(p.ints().begin(), p.ints().end());
    a.strings.assign(p.strings().begin(), p.strings().end());
    for (const auto& t : p.tensors()) a.tensors.push_back(tensor_from_proto(t, base_dir));
    for (const auto& g : p.graphs()) a.graphs.push_back(std::make_shared<Graph>(graph(g)));
    for (const auto& s : p.sparse_tensors()) a.sparse_tensors.push_back(sparse(s));
    for (const auto& t : p.type_protos()) a.type_protos.push_back(type_from_proto(t));
    if (a.type == AttrType::Undefined) a.type = infer_attr_type(p);
    return a;
  }

  // Old models sometimes omit AttributeProto.type; infer it from the populated field.
  static AttrType infer_attr_type(const onnx::AttributeProto& p) {
    if (p.has_f()) return AttrType::Float;
    if (p.has_i()) return AttrType::Int;
    if (p.has_s()) return AttrType::String;
    if (p.has_t()) return AttrType::Tensor;
    if (p.has_g()) return AttrType::Graph;
    if (p.floats_size()) return AttrType::Floats;
    if (p.ints_size()) return AttrType::Ints;
    if (p.strings_size()) return AttrType::Strings;
    if (p.tensors_size()) return AttrType::Tensors;
    if (p.graphs_size()) return AttrType::Graphs;
    return AttrType::Undefined;
  }

  Node node(const onnx::NodeProto& p) {
    Node n;
    n.name = p.name();
    n.op_type = p.op_type();
    n.domain = p.domain();
    n.inputs.assign(p.input().begin(), p.input().end());
    n.outputs.assign(p.output().begin(), p.output().end());
    n.doc_string = p.doc_string();
    for (const auto& a : p.attribute()) n.attributes.push_back(attr(a));
    return n;
  }

  Graph graph(const onnx::GraphProto& p) {
    Graph g;
    g.name = p.name();
    g.doc_string = p.doc_string();
    for (const auto& n : p.node()) g.nodes.push_back(node(n));
    for (const auto& v : p.input()) g.inputs.push_back(value_info_from_proto(v));
    for (const auto& v : p.output()) g.outputs.push_back(value_info_from_proto(v));
    for (const auto& v : p.value_info()) g.value_info.push_back(value_info_from_proto(v));
    for (const auto& t : p.initializer()) {
      g.initializers.push_back(Initializer{t.name(), tensor_from_proto(t, base_dir), t.doc_string()});
      if (release) std::string().swap(*const_cast<onnx::TensorProto&>(t).mutable_raw_data());
    }
    for (const auto& s : p.sparse_initializer()) g.sparse_initializers.push_back(sparse(s));
    return g;
  }
};

struct Writer {
  void tensor(const Tensor& t, const std::string& name, const std::string& doc, onnx::TensorProto* p) {
    tensor_to_proto(t, *p);
    if (!name.empty()) p->set_name(name);
    if (!doc.empty()) p->set_doc_string(doc);
  }
  void sparse(const SparseTensor& s, onnx::SparseTensorProto* p) {
    tensor(s.values, s.name, {}, p->mutable_values());
    if (s.indices.defined()) tensor(s.indices, {}, {}, p->mutable_indices());
    for (int64_t d : s.dims) p->add_dims(d);
  }
  void attr(const Attribute& a, onnx::AttributeProto* p) {
    p->set_name(a.name);
    p->set_type(static_cast<onnx::AttributeProto::AttributeType>(a.type));
    if (!a.doc_string.empty()) p->set_doc_string(a.doc_string);
    if (!a.ref_attr_name.empty()) p->set_ref_attr_name(a.ref_attr_name);
    // Every field that holds something is written, whatever the declared type, so that what was
    // read from a file writes back as it was (a Constant whose type and field disagree included).
    if (a.type == AttrType::Float || a.f != 0) p->set_f(a.f);
    if (a.type == AttrType::Int || a.i != 0) p->set_i(a.i);
    if (a.type == AttrType::String || !a.s.empty()) p->set_s(a.s);
    if (a.t.defined()) tensor(a.t, {}, {}, p->mutable_t());
    if (a.g) graph(*a.g, p->mutable_g());
    if (a.sparse.values.defined()) sparse(a.sparse, p->mutable_sparse_tensor());
    if (a.type == AttrType::TypeProto || a.tp.kind != Type::Kind::Undefined) type_to_proto(a.tp, p->mutable_tp());
    for (float f : a.floats) p->add_floats(f);
    for (int64_t i : a.ints) p->add_ints(i);
    for (const auto& s : a.strings) p->add_strings(s);
    for (const auto& t : a.tensors) tensor(t, {}, {}, p->add_tensors());
    for (const auto& g : a.graphs)
      if (g) graph(*g, p->add_graphs());
    for (const auto& s : a.sparse_tensors) sparse(s, p->add_sparse_tensors());
    for (const auto& t : a.type_protos) type_to_proto(t, p->add_type_protos());
  }
  void node(const Node& n, onnx::NodeProto* p) {
    for (const auto& i : n.inputs) p->add_input(i);
    for (const auto& o : n.outputs) p->add_output(o);
    if (!n.name.empty()) p->set_name(n.name);
    p->set_op_type(n.op_type);
    if (!n.domain.empty()) p->set_domain(n.domain);
    if (!n.doc_string.empty()) p->set_doc_string(n.doc_string);
    for (const auto& a : n.attributes) attr(a, p->add_attribute());
  }
  void graph(const Graph& g, onnx::GraphProto* p) {
    for (const auto& n : g.nodes) node(n, p->add_node());
    if (!g.name.empty()) p->set_name(g.name);
    for (const auto& i : g.initializers) tensor(i.tensor, i.name, i.doc_string, p->add_initializer());
    for (const auto& s : g.sparse_initializers) sparse(s, p->add_sparse_initializer());
    if (!g.doc_string.empty()) p->set_doc_string(g.doc_string);
    for (const auto& v : g.inputs) value_info_to_proto(v, p->add_input());
    for (const auto& v : g.outputs) value_info_to_proto(v, p->add_output());
    for (const auto& v : g.value_info) value_info_to_proto(v, p->add_value_info());
  }
};

}  // namespace

namespace {

Model build_model(const onnx::ModelProto& p, const std::string& base_dir, bool release) {
  Reader r{base_dir, release};
  Model m;
  m.ir_version = p.ir_version();
  for (const auto& o : p.opset_import()) m.opset_import.push_back({o.domain(), o.version()});
  m.producer_name = p.producer_name();
  m.producer_version = p.producer_version();
  m.domain = p.domain();
  m.model_version = p.model_version();
  m.doc_string = p.doc_string();
  for (const auto& kv : p.metadata_props()) m.metadata_props.emplace_back(kv.key(), kv.value());
  for (const auto& t : p.training_info()) m.training_info_raw.push_back(t.SerializeAsString());
  for (const auto& f : p.functions()) {
    Function fn;
    fn.name = f.name();
    fn.domain = f.domain();
    fn.doc_string = f.doc_string();
    fn.inputs.assign(f.input().begin(), f.input().end());
    fn.outputs.assign(f.output().begin(), f.output().end());
    fn.attributes.assign(f.attribute().begin(), f.attribute().end());
    for (const auto& n : f.node()) fn.nodes.push_back(r.node(n));
    for (const auto& o : f.opset_import()) fn.opset_import.push_back({o.domain(), o.version()});
    m.functions.push_back(std::move(fn));
  }
  m.graph = r.graph(p.graph());
  return m;
}

}  // namespace

Model model_from_proto(const onnx::ModelProto& p, const std::string& base_dir) { return build_model(p, base_dir, false); }

void model_to_proto(const Model& m, onnx::ModelProto& p) {
  Writer w;
  p.Clear();
  p.set_ir_version(m.ir_version);
  for (const auto& o : m.opset_import) {
    auto* op = p.add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!m.producer_name.empty()) p.set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) p.set_producer_version(m.producer_version);
  if (!m.domain.empty()) p.set_domain(m.domain);
  if (m.model_version) p.set_model_version(m.model_version);
  if (!m.doc_string.empty()) p.set_doc_string(m.doc_string);
  for (const auto& [k, v] : m.metadata_props) {
    auto* kv = p.add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
  for (const auto& raw : m.training_info_raw) p.add_training_info()->ParseFromString(raw);
  for (const Function& fn : m.functions) {
    auto* f = p.add_functions();
    f->set_name(fn.name);
    f->set_domain(fn.domain);
    if (!fn.doc_string.empty()) f->set_doc_string(fn.doc_string);
    for (const auto& s : fn.inputs) f->add_input(s);
    for (const auto& s : fn.outputs) f->add_output(s);
    for (const auto& s : fn.attributes) f->add_attribute(s);
    for (const auto& n : fn.nodes) w.node(n, f->add_node());
    for (const auto& o : fn.opset_import) {
      auto* op = f->add_opset_import();
      op->set_domain(o.domain);
      op->set_version(o.version);
    }
  }
  w.graph(m.graph, p.mutable_graph());
}

namespace {
bool parse_model_bytes(const std::string& bytes, onnx::ModelProto& proto) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  return proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

// A protobuf parse "succeeds" on many non-ONNX byte strings; these checks tell a model from noise.
std::string why_not_a_model(const onnx::ModelProto& p) {
  if (!p.has_graph()) return "it has no graph";
  if (p.ir_version() <= 0) return "it has no IR version";
  if (p.graph().node_size() == 0 && p.graph().output_size() == 0) return "its graph is empty";
  return {};
}
}  // namespace

namespace {

// What a file that is not protobuf looks like, from its first bytes.
std::string looks_like(const char* head, size_t n) {
  if (n == 0) return {};
  char c = head[0];
  if (c == '{' || c == '[') return " (it looks like JSON)";
  if (c == 'P' && n > 1 && head[1] == 'K') return " (it looks like a zip archive, e.g. a TorchScript .pt)";
  return {};
}

void check_size(size_t n, const std::string& what) {
  if (n == 0) throw InputError(what + " is empty");
  if (n > static_cast<size_t>(INT32_MAX))
    throw InputError(what + " is over 2 GB; ONNX files that large must keep weights as external data");
}

void check_is_model(const onnx::ModelProto& proto, const std::string& what) {
  std::string why = why_not_a_model(proto);
  if (!why.empty()) throw InputError(what + " is not an ONNX model: " + why);
}

// The checked parse of a whole model file's bytes into `proto`.
void parse_model(const std::string& bytes, onnx::ModelProto& proto, const std::string& what) {
  check_size(bytes.size(), what);
  if (!parse_model_bytes(bytes, proto))
    throw InputError(what + " is not a valid ONNX model: the protobuf data is truncated or corrupt" +
                     looks_like(bytes.data(), bytes.size()));
  check_is_model(proto, what);
}

// Reads a file descriptor from the start in chunks, for parsing without the whole file in memory.
class FdStream : public google::protobuf::io::CopyingInputStream {
 public:
  explicit FdStream(int fd) : fd_(fd) {}
  int Read(void* buffer, int size) override {
    for (;;) {
      ssize_t got = ::pread(fd_, buffer, static_cast<size_t>(size), offset_);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) offset_ += got;
      return got < 0 ? -1 : static_cast<int>(got);
    }
  }
  off_t offset() const { return offset_; }

 private:
  int fd_;
  off_t offset_ = 0;
};

// The checked parse of a model file into `proto`, streamed: the file's bytes and the parsed
// weights are never in memory together (a 340 MB model peaked at twice its size).
void parse_model_file(const std::string& path, onnx::ModelProto& proto, const std::string& what) {
  struct stat st;
  Fd f{open_regular(path, "model file", false, st)};
  size_t size = static_cast<size_t>(st.st_size);
  check_size(size, what);
  FdStream in(f.fd);
  bool ok;
  {
    google::protobuf::io::CopyingInputStreamAdaptor adaptor(&in, 1 << 20);
    google::protobuf::io::CodedInputStream coded(&adaptor);
    coded.SetTotalBytesLimit(INT32_MAX);
    ok = proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  if (ok && static_cast<size_t>(in.offset()) != size)
    throw InputError("cannot read model file '" + path + "': it changed or is unreadable");
  if (!ok) {
    char head[2] = {0, 0};
    size_t n = pread_all(f.fd, head, std::min<size_t>(2, size), 0) ? std::min<size_t>(2, size) : 0;
    throw InputError(what + " is not a valid ONNX model: the protobuf data is truncated or corrupt" + looks_like(head, n));
  }
  check_is_model(proto, what);
}

// The model of a parsed proto that is scratch (its weights are freed as they are copied out).
Model take_model(onnx::ModelProto& proto, const std::string& base_dir, const std::string& what) {
  try {
    return build_model(proto, base_dir, true);
  } catch (const InputError& e) {
    throw InputError(what + ": " + e.what(), e.hint());
  }
}

}  // namespace

Model load_model_from_bytes(const std::string& bytes, const std::string& base_dir, const std::string& what) {
  onnx::ModelProto proto;
  parse_model(bytes, proto, what);
  return take_model(proto, base_dir, what);
}

Model load_model(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  std::string what = "'" + path + "'";
  onnx::ModelProto proto;
  parse_model_file(path, proto, what);
  return take_model(proto, parent.empty() ? "." : parent.string(), what);
}

std::string save_model_to_bytes(const Model& model) {
  onnx::ModelProto proto;
  model_to_proto(model, proto);
  if (proto.ByteSizeLong() > static_cast<size_t>(INT32_MAX))
    throw Error("model is over 2 GB; save it to a file so the weights go to external data");
  return proto.SerializeAsString();
}

void save_model(const Model& model, const std::string& path, const SaveOptions& opts) {
  onnx::ModelProto proto;
  model_to_proto(model, proto);
  bool external = opts.external == SaveOptions::External::Always ||
                  (opts.external == SaveOptions::External::Auto && proto.ByteSizeLong() > (size_t{1} << 31) - (size_t{64} << 20));
  if (!external) {
    write_file_atomic(path, proto.SerializeAsString());
    return;
  }
  std::string data_name = opts.external_file.empty() ? fs::path(path).filename().string() + ".data" : opts.external_file;
  fs::path data_path = fs::path(path).parent_path() / data_name;
  // Moves large initializers (all graphs, recursively) into one data file, 64-byte aligned.
  std::string tmp_data = data_path.string() + ".tmp" + std::to_string(::getpid());
  std::ofstream out(tmp_data, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + tmp_data + "'", {}, kExitUsage);
  int64_t offset = 0;
  std::function<void(onnx::GraphProto*)> move_out = [&](onnx::GraphProto* g) {
    for (auto& t : *g->mutable_initializer()) {
      if (!t.has_raw_data() || t.raw_data().size() < opts.external_threshold) continue;
      int64_t pad = (64 - offset % 64) % 64;
      std::string zeros(static_cast<size_t>(pad), '\0');
      out.write(zeros.data(), pad);
      offset += pad;
      const std::string& raw = t.raw_data();
      out.write(raw.data(), static_cast<std::streamsize>(raw.size()));
      auto add = [&](const char* k, const std::string& v) {
        auto* e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", data_name);
      add("offset", std::to_string(offset));
      add("length", std::to_string(raw.size()));
      offset += static_cast<int64_t>(raw.size());
      t.clear_raw_data();
      t.set_data_location(onnx::TensorProto::EXTERNAL);
    }
    for (auto& n : *g->mutable_node())
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) move_out(a.mutable_g());
        for (auto& sg : *a.mutable_graphs()) move_out(&sg);
      }
  };
  move_out(proto.mutable_graph());
  out.close();
  if (!out) {
    std::error_code ec;
    fs::remove(tmp_data, ec);
    throw Error("failed writing '" + data_path.string() + "' (disk full?)", {}, kExitUsage);
  }
  try {
    write_file_atomic(path + ".onnxtmp", proto.SerializeAsString());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp_data, ec);
    throw;
  }
  fs::rename(tmp_data, data_path);
  fs::rename(path + ".onnxtmp", path);
}

}  // namespace t2o
