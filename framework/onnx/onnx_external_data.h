// ONNX external data: a model over protobuf's 2 GiB (torch.onnx.export of
// RegNet-Y-128GF, for one) keeps its tensors in files beside the model, each
// tensor naming its file (`location`, relative to the model's folder), the
// byte `offset` in it and the `length`. Reading the model brings those bytes
// into the tensors, so everything after sees ordinary tensors.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_EXTERNAL_DATA_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_EXTERNAL_DATA_H_

#include <onnx/onnx_pb.h>

#include <string>

#include "framework/base/status.h"

namespace spill {

// Loads every external tensor of `model` (initializers and Constant nodes'
// values) from `model_dir`. A location that is absolute or leaves the folder,
// a missing file, or a range past its end is an error naming `label`, the
// tensor and the file. With an empty `model_dir` (a model given as bytes) any
// external tensor is an error.
Status LoadOnnxExternalData(onnx::ModelProto* model, const std::string& model_dir,
                            const std::string& label);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_EXTERNAL_DATA_H_
