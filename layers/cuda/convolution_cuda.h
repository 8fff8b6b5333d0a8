// Convolution on the GPU with cuDNN. Each operation (forward; backward: the
// filter gradient and, when the input wants one, the data gradient) lists
// the cuDNN algorithms that cuDNN's heuristics (cudnnGet*Algorithm_v7) find
// usable for the layer's shape, in their order, with their workspace bytes
// (cudnnGet*WorkspaceSize). Only deterministic algorithms are listed where
// cuDNN offers any (recomputation must reproduce outputs bit for bit), and
// the math is plain float32 FMA (CUDNN_FMA_MATH: no TF32 tensor cores), so
// results stay comparable with the CPU layer.
//
// A candidate's time is its measured time once CalibrateCudaConvolutions has
// run, else an estimate from its rank in the heuristics' list (1 ms, 2 ms,
// ...), which keeps cuDNN's own preference.
//
// Shapes are queried through a process-wide cuDNN handle of the current GPU
// (made on first use), because layers are shaped before a device exists.
#ifndef SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_
#define SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_

#include "framework/cuda/cuda_device.h"
#include "framework/net.h"
#include "framework/status.h"

namespace spill {

// Measures every candidate algorithm of every CUDA convolution layer of
// `net` with cudnnFind*AlgorithmEx on `device`'s handle, on scratch buffers
// it cudaMallocs and frees again (workspace up to the largest candidate's,
// capped by the free device memory), and stores the times in the layers.
// Candidates that could not be measured (their workspace did not fit) keep
// an estimate slower than every measured one. Layers of one geometry are
// measured once; layers of other types are skipped. Call it before the
// memory runtime reserves its device region: it is registered as the CUDA
// backend's NetCalibration (framework/device_registry.h), so CalibrateNet
// runs it. Where scratch memory cannot be had or a timing fails, the layer
// keeps its estimates (with a warning); errors are failed cuDNN queries.
Status CalibrateCudaConvolutions(const Net& net, CudaDevice& device);

}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_
