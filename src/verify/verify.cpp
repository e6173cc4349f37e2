// Numerical verification (libtorch vs runtime) lives in this library.
namespace t2o {}
