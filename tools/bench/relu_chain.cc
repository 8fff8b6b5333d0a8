#include "tools/bench/relu_chain.h"

namespace spill {

std::string ReluChainYaml(int64_t depth, int64_t classes, bool convolution_first) {
  std::string yaml = R"(name: relu_chain
blocks:
  unit:
    layers:
      - {name: relu, type: relu}
layers:
  - {name: data, type: input, shape: [1, 8, 8]}
)";
  if (convolution_first) {
    yaml += "  - {name: conv, type: convolution, filters: 1, kernel: 3, pad: 1}\n";
  }
  yaml += "  - {name: chain, block: unit, repeat: " + std::to_string(depth) + "}\n";
  yaml += "  - {name: fc, type: fully_connected, outputs: " + std::to_string(classes) + "}\n";
  yaml += "  - {name: loss, type: softmax_loss}\n";
  return yaml;
}

}  // namespace spill
