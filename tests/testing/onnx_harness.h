// What the ONNX tests share: the PyTorch fixtures, a forward pass that
// returns the scores (the loss layer's input), and the every-mode training
// comparison of an imported network.
#ifndef SPILL_TESTS_TESTING_ONNX_HARNESS_H_
#define SPILL_TESTS_TESTING_ONNX_HARNESS_H_

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/config/net_spec.h"
#include "framework/graph/net.h"
#include "framework/io/npz.h"

namespace spill {
namespace testing {

// tests/testdata/onnx/NAME.onnx and PyTorch's input and scores for it.
struct OnnxFixture {
  std::string onnx;           // path
  std::vector<float> input;   // batch x C x H x W
  std::vector<float> output;  // batch x classes
  int64_t batch = 0;
};
StatusOr<OnnxFixture> LoadOnnxFixture(const std::string& name);
// The fixture's model as a protobuf, for tests to edit.
onnx::ModelProto LoadOnnxProto(const std::string& name);
// The error of parsing and importing `model` ("" when both succeed).
std::string OnnxImportError(const onnx::ModelProto& model);

// The scores of `input` in the evaluation phase, with `params` loaded (every
// parameter must be there), one convolution algorithm pinned.
StatusOr<std::vector<float>> ForwardScores(const NetSpec& spec, const NpzArchive& params,
                                           const std::vector<float>& input, int64_t batch);

// Every parameter of `net` as a checkpoint holds it ("params/<tensor>",
// N x C x H x W), seeded, with batch norm statistics, scales and shifts of
// all sorts of plausible values.
NpzArchive SeededParams(const Net& net);

// `count` input values spread over [-1, 1), the same every call.
std::vector<float> SomeImages(int64_t count);

// Two training steps at batch 2 from `params` in every memory mode, each at
// a roomy budget and at the smallest that runs: the baseline's losses and
// weights bit for bit (gtest expectations).
void ExpectEveryModeBitIdentical(const NetSpec& spec, const NpzArchive& params);

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_ONNX_HARNESS_H_
