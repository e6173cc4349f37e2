// Prints the converter's op table as Markdown: which aten/prim op needs which minimum opset.
// docs/pitfalls.md embeds the output; the pitfall_op_table_in_docs test keeps them in sync.
#include <cstdio>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "torch/context.h"

int main() {
  std::map<int, std::vector<std::string>> by_opset;
  for (const auto& [op, e] : t2o::op_table()) by_opset[e.min_opset].push_back(op);
  std::printf("| minimum opset | ops |\n|---|---|\n");
  for (auto& [opset, ops] : by_opset) {
    std::sort(ops.begin(), ops.end());
    if (opset <= 9) {
      std::printf("| 9 | every other converted op |\n");
      continue;
    }
    std::string list;
    for (const auto& o : ops) list += (list.empty() ? "`" : ", `") + o + "`";
    std::printf("| %d | %s |\n", opset, list.c_str());
  }
  return 0;
}
