// ONNX models for the fuzz test: structural mutations of a valid model
// (operators, attributes, shapes, opsets, initializers, outputs, node order,
// names) made on the parsed protobuf, so they reach the importer's checks
// rather than stopping at the parser; byte mutations (fuzz_mutations.h)
// cover the parser. Seeded and deterministic, as the other mutations.
#ifndef SPILL_TESTS_TESTING_FUZZ_ONNX_H_
#define SPILL_TESTS_TESTING_FUZZ_ONNX_H_

#include <string>

#include "framework/base/status.h"
#include "tests/testing/fuzz_mutations.h"

namespace spill {
namespace fuzz {

enum class OnnxMutation {
  kOperator,     // a node's op_type replaced
  kInput,        // a node's input dropped, renamed or added
  kAttribute,    // an attribute set to an extreme value, list or type
  kInputShape,   // the graph input's dims symbolic, zero, negative or huge
  kOpset,        // the operator set version
  kInitializer,  // an initializer's dims, type or data
  kOutputs,      // the graph's outputs removed, doubled or renamed
  kNodeOrder,    // two nodes swapped (no longer topological)
  kCount,
};
const char* OnnxMutationName(OnnxMutation m);

// `bytes` is a serialized valid model; returns the serialized mutant.
std::string MutateOnnx(const std::string& bytes, OnnxMutation m, Random& rng);

// What a config's `model: {onnx: ...}` runs: import, parse the network, build
// it at batch 2, plan it, and load the imported weights' names and shapes.
Status OnnxPipeline(const std::string& path);

}  // namespace fuzz
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_FUZZ_ONNX_H_
