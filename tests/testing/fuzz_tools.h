// The fuzz test's pipelines for what the tools read and write beyond
// networks, configs, datasets and checkpoints: predict's inputs, exported
// ONNX models read back, and the host tier under budgets too small, zero or
// huge. Each returns kInternal when the code accepted something and then
// got it wrong (a model that reads back different, an example that is not
// finite, a run whose losses are not the baseline's): the fuzz test fails on
// kInternal, any other rejection is a clean error.
#ifndef SPILL_TESTS_TESTING_FUZZ_TOOLS_H_
#define SPILL_TESTS_TESTING_FUZZ_TOOLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {
namespace fuzz {

// An image in the format of `extension` (".png", ".jpg"), rows x cols,
// 1 or 3 channels, as OpenCV encodes it.
std::vector<uint8_t> EncodedImage(const std::string& extension, int rows, int cols, int channels);

// `predict --input path` for a config of `dataset` (fashion_mnist: 1x28x28,
// cifar10: 3x32x32): read, and if accepted, at least one example of the
// network's input size, every value finite, a label per example where the
// file has labels.
Status PredictInputPipeline(const std::string& path, const std::string& dataset);

// `onnx_export` of the network file at `net_path` with seeded weights, to
// `onnx_path`, read back by the importer: either export refuses the network
// or the file imports as the same network - the same weights and the same
// scores bit for bit. Networks too large to run in a fuzz case are refused
// (kInvalidArgument) before any weight is made.
Status ExportPipeline(const std::string& net_path, const std::string& onnx_path);

// A small network trained two steps under a training config's memory section
// (`memory_yaml`, the text inside `memory: {...}`): either it runs with the
// baseline's losses bit for bit or it ends in a clean error (an
// out-of-memory report naming what is short, a refused value).
Status HostTierPipeline(const std::string& memory_yaml);

}  // namespace fuzz
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_FUZZ_TOOLS_H_
