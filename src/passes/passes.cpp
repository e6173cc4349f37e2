// Graph rewrites (constant folding, elimination, fusion) live in this library.
namespace t2o {}
