#pragma once
// The accuracy part of the quantize report, shared by 'quantize' and 'convert --quantize'.
#include <string>
#include <vector>

#include "quant/quant.h"

namespace t2o::cli {

// "x 1x3x224x224": the sizes of the first set (generated sets all have them).
std::string set_sizes(const std::vector<InputSet>& sets);
// Prints "accuracy  on N generated|given input sets (...), against the float model:" and a line per
// output (max abs difference, cosine, top-1 agreement for classifiers).
void print_quant_accuracy(const AccuracyReport& acc, const std::vector<InputSet>& eval, bool generated);

}  // namespace t2o::cli
