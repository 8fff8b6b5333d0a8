// Where a training config's network and its first weights come from when
// they are not spill's own files: an ONNX model (framework/onnx/onnx_import.h).
//
//   model: {onnx: resnet18.onnx}   # the network, imported when the config loads
//   run.init                       # defaults to the same file: its weights start the run
//
// `train --init FILE` and `run.init` take a checkpoint (.npz) or an ONNX
// model (.onnx): either way the parameters that match by name and shape are
// loaded and the others keep their fresh initialization.
#ifndef SPILL_TOOLS_TRAINER_MODEL_SOURCE_H_
#define SPILL_TOOLS_TRAINER_MODEL_SOURCE_H_

#include <string>

#include "framework/config/net_spec.h"
#include "framework/graph/net.h"
#include "framework/io/checkpoint.h"
#include "framework/schedule/tensor_store.h"

namespace spill {

// The network of an ONNX file, in spill's format.
StatusOr<NetSpec> LoadOnnxModel(const std::string& path);

// Whether `path` names an ONNX model (by its .onnx extension).
bool IsOnnxFile(const std::string& path);

// LoadMatchingParameters for a checkpoint, or for an ONNX model's weights.
StatusOr<PartialLoad> LoadInitialParameters(const std::string& path, const Net& net,
                                            TensorStore& store);

}  // namespace spill

#endif  // SPILL_TOOLS_TRAINER_MODEL_SOURCE_H_
