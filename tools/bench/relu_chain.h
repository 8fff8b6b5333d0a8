// The network of the depth benchmark (bench_depth) and the deep-chain tests:
// `depth` ReLUs on a 1x8x8 input, then a fully connected layer of
// `classes` outputs and a softmax loss - thousands of steps whose tensors
// are tiny, so what grows with depth is the planner's own work. With
// `convolution_first`, a 3x3 convolution comes before the chain, so that
// backward runs through every ReLU and each ReLU's output is droppable and
// needed by its own backward.
#ifndef SPILL_TOOLS_BENCH_RELU_CHAIN_H_
#define SPILL_TOOLS_BENCH_RELU_CHAIN_H_

#include <cstdint>
#include <string>

namespace spill {

// The network's YAML, named relu_chain.
std::string ReluChainYaml(int64_t depth, int64_t classes = 10, bool convolution_first = false);

}  // namespace spill

#endif  // SPILL_TOOLS_BENCH_RELU_CHAIN_H_
