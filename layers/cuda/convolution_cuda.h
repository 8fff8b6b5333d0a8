// Convolution on the GPU with cuDNN. Each operation (forward; backward: the
// filter gradient and, when the input wants one, the data gradient) lists
// the algorithms cuDNN finds usable for the layer's geometry
// (layers/cuda/conv_cudnn_cuda.h: deterministic, plain float32 FMA math,
// asked once per geometry and process), with their workspace bytes.
//
// Two ways of running, one candidate list:
//   * the whole batch in one cuDNN call per operation (the default);
//   * image by image (BatchSlice::in_image_order: a slice of the batch, or
//     an algorithm pinned), each image its own call on one-image
//     descriptors, the filter and bias gradients adding image after image
//     into what the step's earlier images left. A step run slice by slice
//     then makes exactly the calls of the step run whole, so its results
//     are the same bits (layers/slice_plans.h). The candidates are the
//     algorithms usable both ways, each with the larger workspace.
//
// A candidate's time is its measured time once CalibrateCudaConvolutions has
// run, else an estimate from its rank in the heuristics' list (1 ms, 2 ms,
// ...), which keeps cuDNN's own preference. Calibration drops candidates
// cuDNN fails to run.
//
// In 16 bits (a network in bf16 or fp16 whose layer writes a 16-bit output:
// computes_16_bit) cuDNN takes x, y, dx and dy as they are stored, on
// tensor cores with float32 sums. The float32 weights are rounded into a
// 16-bit copy at the front of the workspace for each call, and so is a
// float32 input (the image: the one activation a 16-bit network keeps in
// float32, which wants no gradient); the filter gradient comes out in 16
// bits there too and is widened into the float32 gradient - added image
// after image in image order. The bias is added and its gradient summed by
// the layer's own kernels (conv_bias_kernels_cuda.h: float32 bias, double
// sums). Where cuDNN offers no algorithm for a 16-bit geometry the layer
// computes in float32 on the executor's converted copies, as before, and
// says so once.
#ifndef SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_
#define SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_

#include <mutex>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/cuda/cuda_device.h"
#include "framework/graph/net.h"
#include "layers/conv_candidates.h"
#include "layers/convolution_layer.h"
#include "layers/cuda/conv_cudnn_cuda.h"

namespace spill {

// Candidates not yet measured: cuDNN's heuristic order, 1 ms per rank.
constexpr double kConvRankSeconds = 1e-3;

class CudaConvolutionLayer : public ConvolutionLayer {
 public:
  explicit CudaConvolutionLayer(LayerParams& params) : ConvolutionLayer(params) {}

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  int num_algorithm_ops(Pass pass) const override {
    return pass == Pass::kForward ? 1 : (propagate_down(0) ? 2 : 1);
  }
  std::vector<AlgorithmCandidate> algorithm_candidates(Pass pass, int op,
                                                       int64_t images) const override;
  // The workspace of the default (first) candidates.
  size_t workspace_bytes(Pass pass) const override;
  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return half_ != DType::kF32; }

  void Forward(const ForwardArgs& args) const override;
  // Operation 0: the filter (and bias) gradient; 1: the data gradient.
  void Backward(const BackwardArgs& args) const override;

  // ---- Calibration (conv_calibration_cuda.cc) ----
  // Times every candidate with cudnnFind*AlgorithmEx on scratch buffers.
  Status Calibrate(CudaDevice& device) const;
  std::string GeometryKey() const { return ConvGeometryKey(geom_); }
  // Takes `other`'s candidates and times when both listed the same ones.
  bool CopyTimesFrom(const CudaConvolutionLayer& other) const;

 protected:
  // 16 bits where input and output are stored in one 16-bit type.
  void DtypesChanged() override;

 private:
  // The 16-bit copies at the front of a pass's workspace (none in float32),
  // and the rest, cuDNN's.
  struct Copies {
    void* w = nullptr;         // the weights in the storage type
    void* x = nullptr;         // a float32 input rounded to it (narrow_input_)
    void* dw = nullptr;        // the filter gradient as cuDNN writes it (backward)
    float* dw_wide = nullptr;  // an image's filter gradient widened, to add
    size_t bytes = 0;          // what the copies take
    Workspace rest;
  };
  // Carves `workspace` (null data: only `bytes`).
  Copies Carve(Pass pass, const Workspace& workspace) const;
  size_t CopyBytes(Pass pass) const { return Carve(pass, {}).bytes; }
  // Descriptors and candidates for geom_ in half_ (Reshape, DtypesChanged).
  Status Prepare();
  // Rounds the float32 parameter into its copy on the compute stream.
  void Narrow(CudaDevice& device, const Tensor& param, void* copy) const;
  // db (=|+=) the sum of `images` images of dy over each output plane
  // (cuDNN in float32, conv_bias_kernels in 16 bits); `first`: overwrite.
  void BiasGradient(CudaDevice& device, const cuda::ConvDescriptors& d, const void* dy,
                    int64_t images, float* db, bool first) const;
  // grad (=|+=) the staged 16-bit gradient, widened; `first`: overwrite.
  void Widen(CudaDevice& device, const void* staged, float* wide, float* grad, int64_t count,
             bool first) const;

  static int OpIndex(Pass pass, int op) {
    if (pass == Pass::kForward) return kConvForward;
    return op == 0 ? kConvFilterGrad : kConvDataGrad;
  }
  void CheckPrepared() const;
  // The algorithm chosen for argument slot `slot` (the default, the first
  // candidate, when none is chosen), checked against the workspace given.
  ConvCandidate Chosen(int op, const std::vector<int>& algorithms, int slot,
                       const Workspace& workspace) const;
  // x and dy must be stored as the layer was shaped for.
  void CheckStorage(const Tensor& t, DType stored, const char* what) const;
  // x as cuDNN reads it: itself, or rounded into `copy` (narrow_input_).
  const char* InputAsComputed(CudaDevice& device, const Tensor& x, void* copy) const;
  struct BackwardOperands;
  BackwardOperands Operands(const BackwardArgs& args, CudaDevice& device) const;
  void BackwardWhole(const BackwardArgs& args, CudaDevice& device) const;
  void BackwardByImage(const BackwardArgs& args, CudaDevice& device) const;
  // Measured times of one operation, failed candidates dropped; under mutex_.
  Status Record(int op, const std::vector<ConvMeasurement>& results, size_t workspace) const;

  mutable std::mutex mutex_;  // guards the lists and times after shaping
  bool prepared_ = false;     // descriptors and candidates come from cuDNN
  std::string why_;           // why not, when not
  // Calibration may drop candidates (before any runtime reads them).
  mutable std::vector<ConvCandidate> algos_[kConvOps];
  mutable std::vector<double> seconds_[kConvOps];
  cuda::ConvDescriptors whole_;  // the layer's batch
  cuda::ConvDescriptors image_;  // one image
  DType half_ = DType::kF32;     // the 16-bit type the layer computes in, or kF32
  bool narrow_input_ = false;    // its input is float32 (the image): rounded to half_
};

// Measures every candidate algorithm of every CUDA convolution layer of
// `net` with cudnnFind*AlgorithmEx on `device`'s handle, on scratch buffers
// it cudaMallocs and frees again (workspace up to the largest candidate's,
// capped by the free device memory), and stores the times in the layers.
// Candidates that could not be measured (their workspace did not fit) keep
// an estimate slower than every measured one; candidates cuDNN failed to
// run are dropped (an error if an operation is left with none). Layers of
// one geometry are measured once; layers of other types are skipped. Call
// it before the memory runtime is created (it reads the candidates): it is
// registered as the CUDA backend's NetCalibration
// (framework/device/device_registry.h), so CalibrateNet runs it. Where scratch
// memory cannot be had or a timing fails, the layer keeps its estimates
// (with a warning).
Status CalibrateCudaConvolutions(const Net& net, CudaDevice& device);

}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_CONVOLUTION_CUDA_H_
