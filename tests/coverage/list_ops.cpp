// Prints the converter's op table, one "OP<TAB>MIN_OPSET" line per aten/prim op, sorted, then the ops
// rewritten into others before conversion (src/torch/decompose.cpp) as "OP<TAB>rewritten".
// The coverage tests and docs/ops.md read it: the table is the one source of which ops convert.
#include <cstdio>
#include <string>

#include "torch/context.h"
#include "torch/convert.h"
#include "torch/decompose.h"

int main() {
  const auto& table = t2o::op_table();
  for (const std::string& op : t2o::supported_torch_ops())
    std::printf("%s\t%d\n", op.c_str(), table.at(op).min_opset);
  for (const std::string& op : t2o::decomposed_ops())
    if (!table.count(op)) std::printf("%s\trewritten\n", op.c_str());
  return 0;
}
