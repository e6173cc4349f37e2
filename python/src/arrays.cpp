#include "arrays.h"

#include <cstring>

namespace t2o::pyext {

namespace {

struct DTypeName {
  DType dtype;
  const char* numpy;  // as np.dtype() spells it
  const char* ort;    // as ONNX Runtime's NodeArg.type spells it
};

constexpr DTypeName kTypes[] = {
    {DType::Float, "float32", "float"},   {DType::Double, "float64", "double"}, {DType::Float16, "float16", "float16"},
    {DType::Int8, "int8", "int8"},        {DType::Int16, "int16", "int16"},     {DType::Int32, "int32", "int32"},
    {DType::Int64, "int64", "int64"},     {DType::UInt8, "uint8", "uint8"},     {DType::UInt16, "uint16", "uint16"},
    {DType::UInt32, "uint32", "uint32"},  {DType::UInt64, "uint64", "uint64"},  {DType::Bool, "bool", "bool"},
    {DType::String, "object", "string"},  {DType::BFloat16, "", "bfloat16"},
};

bool is_string_kind(const pyb::dtype& dt) { return dt.kind() == 'U' || dt.kind() == 'S' || dt.kind() == 'O'; }

}  // namespace

DType dtype_of(const pyb::dtype& dt, const std::string& what) {
  if (is_string_kind(dt)) return DType::String;
  for (const DTypeName& n : kTypes)
    if (*n.numpy && n.dtype != DType::String && dt.is(pyb::dtype(n.numpy))) return n.dtype;
  throw Error(what + " has NumPy dtype " + text(dt) + ", which ONNX tensors do not have",
              "use float32/float64/float16, int8..int64, uint8..uint64, bool or str arrays", kExitUsage);
}

pyb::dtype numpy_dtype(DType t) {
  for (const DTypeName& n : kTypes)
    if (n.dtype == t && *n.numpy) return pyb::dtype(n.numpy);
  throw Error("element type " + std::string(dtype_name(t)) + " has no NumPy dtype", {}, kExitUnsupported);
}

std::string ort_type_name(const Type& t) {
  auto elem = [](DType d) -> std::string {
    for (const DTypeName& n : kTypes)
      if (n.dtype == d) return n.ort;
    return std::string(dtype_name(d));
  };
  switch (t.kind) {
    case Type::Kind::Tensor: return "tensor(" + elem(t.elem) + ")";
    case Type::Kind::Sequence: return "seq(" + (t.inner ? ort_type_name(*t.inner) : std::string("?")) + ")";
    case Type::Kind::Optional: return "optional(" + (t.inner ? ort_type_name(*t.inner) : std::string("?")) + ")";
    case Type::Kind::Map: return "map(" + elem(t.elem) + "," + (t.inner ? ort_type_name(*t.inner) : std::string("?")) + ")";
    default: return t.to_string();
  }
}

Tensor borrow_array(const pyb::handle& obj, const std::string& what, pyb::object& keep) {
  pyb::array a = pyb::array::ensure(obj);
  if (!a) throw Error(what + " is not an array (got " + text(pyb::type::of(obj)) + ")",
                      "pass a numpy.ndarray", kExitUsage);
  Dims dims(a.shape(), a.shape() + a.ndim());
  DType dt = dtype_of(a.dtype(), what);
  if (dt == DType::String) {
    pyb::array flat = pyb::array::ensure(a.attr("ravel")());
    Tensor t(DType::String, dims);
    for (int64_t i = 0; i < t.numel(); ++i) {
      pyb::object e = flat.attr("__getitem__")(i);
      t.strings()[i] = pyb::isinstance<pyb::bytes>(e) ? std::string(pyb::bytes(e)) : std::string(pyb::str(e));
    }
    return t;
  }
  constexpr int kDirect = static_cast<int>(pyb::array::c_style) | static_cast<int>(pyb::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if ((a.flags() & kDirect) != kDirect) a = pyb::array::ensure(a, pyb::array::c_style | pyb::array::forcecast);
  keep = a;
  return Tensor::borrow(dt, dims, const_cast<void*>(a.data()));
}

Tensor borrow_writable(pyb::array& a, DType dtype, const std::string& what) {
  DType got = dtype_of(a.dtype(), what);
  Dims dims(a.shape(), a.shape() + a.ndim());
  if (got != dtype)
    throw Error(what + " has dtype " + text(a.dtype()) + ", the output is " +
                    std::string(dtype_name(dtype)),
                "allocate it with numpy dtype " + text(numpy_dtype(dtype)), kExitUsage);
  if (dtype == DType::String) throw Error(what + ": string outputs cannot be bound to a buffer", {}, kExitUsage);
  if (!(a.flags() & pyb::array::c_style) || !a.writeable())
    throw Error(what + " must be a writable C-contiguous array", "allocate it with numpy.empty(shape, dtype)",
                kExitUsage);
  return Tensor::borrow(dtype, dims, a.mutable_data());
}

pyb::array to_array(const Tensor& t) {
  std::vector<pyb::ssize_t> shape(t.dims().begin(), t.dims().end());
  if (t.dtype() == DType::String) {
    pyb::array out(pyb::dtype("object"), shape);
    pyb::object flat = out.attr("reshape")(-1);
    for (int64_t i = 0; i < t.numel(); ++i) flat.attr("__setitem__")(i, pyb::str(t.strings()[i]));
    return out;
  }
  if (t.dtype() == DType::BFloat16) {
    // NumPy has no bfloat16: widen to float32.
    pyb::array_t<float> out(shape);
    float* p = out.mutable_data();
    const auto* s = static_cast<const uint16_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = bfloat16_to_float(s[i]);
    return out;
  }
  if (t.numel() == 0 || !t.raw()) return pyb::array(numpy_dtype(t.dtype()), shape);
  auto* owner = new Tensor(t);
  pyb::capsule keep(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  return pyb::array(numpy_dtype(t.dtype()), shape, t.raw(), keep);
}

pyb::object to_python(const RValue& v) {
  switch (v.kind) {
    case RValue::Kind::Tensor: return to_array(v.tensor);
    case RValue::Kind::Sequence: {
      pyb::list l;
      for (const Tensor& t : v.sequence) l.append(to_array(t));
      return l;
    }
    case RValue::Kind::Optional: return v.element ? to_python(*v.element) : pyb::none();
    case RValue::Kind::Map: {
      pyb::dict d;
      pyb::array k = to_array(v.map_keys), val = to_array(v.map_values);
      for (pyb::ssize_t i = 0; i < k.size(); ++i) d[k.attr("__getitem__")(i)] = val.attr("__getitem__")(i);
      return d;
    }
    default: return pyb::none();
  }
}

}  // namespace t2o::pyext
