// The scores a network computes for given images with given weights - what
// its loss layer reads, before the softmax - in the evaluation phase on the
// CPU, for comparisons with other frameworks (the ONNX import checks against
// PyTorch, tests and tools/bench/bench_onnx).
#ifndef SPILL_TOOLS_COMMON_SCORES_H_
#define SPILL_TOOLS_COMMON_SCORES_H_

#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/config/net_spec.h"
#include "framework/io/npz.h"

namespace spill {

// `images`: batch x C x H x W floats. Every parameter of the network must be
// in `params` ("params/<tensor>", as a checkpoint or an import names them),
// and nothing else. `workspace` is a memory.workspace policy (pin:NAME keeps
// one convolution algorithm).
StatusOr<std::vector<float>> ScoreImages(const NetSpec& spec, const NpzArchive& params,
                                         const std::vector<float>& images, int64_t batch,
                                         const std::string& workspace);

}  // namespace spill

#endif  // SPILL_TOOLS_COMMON_SCORES_H_
