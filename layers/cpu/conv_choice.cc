#include "layers/cpu/conv_choice.h"

#include <algorithm>

namespace spill {
namespace cpu {

ConvAlgorithmChoice::ConvAlgorithmChoice(LayerParams& params) {
  pinned_ = params.String("algorithm", "");
  if (!pinned_.empty() && FindConvAlgorithm(pinned_) == nullptr) {
    params.Fail("algorithm", UnknownConvAlgorithm(pinned_));
  }
}

Status ConvAlgorithmChoice::Select(const ConvGeometry& g, bool dnnl_first) {
  selected_.clear();
  for (const ConvAlgorithm* a : ConvAlgorithms()) {
    if (a->Supports(g) && (pinned_.empty() || a->name() == pinned_)) selected_.push_back(a);
  }
  if (selected_.empty()) return InvalidArgument("no convolution algorithm supports this geometry");
  if (dnnl_first) {
    std::stable_partition(selected_.begin(), selected_.end(),
                          [](const ConvAlgorithm* a) { return a->name().rfind("dnnl", 0) == 0; });
  }
  SetDtypes(g.input_dtype, g.output_dtype);
  return Status::Ok();
}

void ConvAlgorithmChoice::SetDtypes(DType input, DType output) {
  // bfloat16 arithmetic on values stored in IEEE half would lose their
  // precision: only for bfloat16 storage.
  const bool bf16 = input == DType::kBF16 || output == DType::kBF16;
  supported_.clear();
  for (const ConvAlgorithm* a : selected_) {
    if (bf16 || !a->computes_16_bit() || !pinned_.empty()) supported_.push_back(a);
  }
  const char* preferred = bf16 ? "dnnl_bf16" : "dnnl";
  default_ = 0;
  for (size_t i = 0; i < supported_.size(); ++i) {
    if (supported_[i]->name() == "dnnl") default_ = static_cast<int>(i);
  }
  for (size_t i = 0; i < supported_.size(); ++i) {
    if (supported_[i]->name() == preferred && supported_[i]->takes(input) &&
        supported_[i]->takes(output)) {
      default_ = static_cast<int>(i);
    }
  }
}

const ConvAlgorithm* ConvAlgorithmChoice::Chosen(const std::vector<int>& algorithms, int op) const {
  if (op < static_cast<int>(algorithms.size()) && algorithms[op] >= 0) {
    return supported_[algorithms[op]];
  }
  return supported_[default_];
}

}  // namespace cpu
}  // namespace spill
