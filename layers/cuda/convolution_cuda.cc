// convolution on the GPU with cuDNN (see convolution_cuda.h).
//
// Descriptors are made when the layer is shaped - for its batch and for one
// image - and only read afterwards. The candidate lists (algorithm, name,
// workspace) are fixed then too, except that calibration, which runs before
// any memory runtime reads them, may drop candidates cuDNN fails to run;
// indices the runtime chooses stay valid from then on.
#include "layers/cuda/convolution_cuda.h"

#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

ConvGeometry OneImage(ConvGeometry g) {
  g.batch = 1;
  return g;
}

}  // namespace

Status CudaConvolutionLayer::Reshape(const std::vector<Shape>& inputs,
                                     std::vector<Shape>* outputs) {
  SPILL_RETURN_IF_ERROR(ConvolutionLayer::Reshape(inputs, outputs));
  SPILL_RETURN_IF_ERROR(CheckDescriptorLimits(name(), geom_));
  std::lock_guard<std::mutex> lock(mutex_);
  prepared_ = false;
  for (auto& list : seconds_) list.clear();
  if (!cuda::ConvQueryAvailable(&why_)) {
    // No GPU: plans can still be made, from cuDNN's usual zero-workspace
    // algorithms; running the layer is an error.
    const int defaults[kConvOps] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1};
    for (int op = 0; op < kConvOps; ++op) {
      algos_[op] = {{defaults[op], cuda::ConvAlgoName(op, defaults[op]), 0}};
    }
  } else {
    SPILL_RETURN_IF_ERROR(whole_.Set(geom_, name()));
    SPILL_RETURN_IF_ERROR(image_.Set(OneImage(geom_), name()));
    SPILL_ASSIGN_OR_RETURN(const ConvCandidates whole, cuda::CachedConvCandidates(geom_, whole_));
    SPILL_ASSIGN_OR_RETURN(const ConvCandidates image,
                           cuda::CachedConvCandidates(OneImage(geom_), image_));
    const ConvCandidates both = CombineForImageOrder(whole, image);
    for (int op = 0; op < kConvOps; ++op) {
      if (both.ops[op].empty()) {
        return InvalidArgument(
            std::string("cuDNN offers no algorithm for the ") + ConvOpName(op) +
            " of convolution '" + name() + "' (" +
            Shape(geom_.batch, geom_.channels, geom_.height, geom_.width).ToString() +
            " input) that runs both on the batch and image by image");
      }
      algos_[op] = both.ops[op];
    }
    prepared_ = true;
  }
  for (int op = 0; op < kConvOps; ++op) {
    for (size_t r = 0; r < algos_[op].size(); ++r)
      seconds_[op].push_back(kConvRankSeconds * (1 + r));
  }
  return Status::Ok();
}

// cuDNN's workspace sizes are the whole batch's (found for its descriptors);
// a slice's calls get that much.
std::vector<AlgorithmCandidate> CudaConvolutionLayer::algorithm_candidates(Pass pass, int op,
                                                                           int64_t) const {
  if (op < 0 || op >= num_algorithm_ops(pass)) return {};
  const int index = OpIndex(pass, op);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<AlgorithmCandidate> candidates;
  for (size_t r = 0; r < algos_[index].size(); ++r) {
    candidates.push_back({algos_[index][r].name, seconds_[index][r], algos_[index][r].workspace});
  }
  return candidates;
}

size_t CudaConvolutionLayer::workspace_bytes(Pass pass) const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (int op = 0; op < num_algorithm_ops(pass); ++op) {
    const std::vector<ConvCandidate>& list = algos_[OpIndex(pass, op)];
    if (!list.empty()) bytes = std::max(bytes, list[0].workspace);
  }
  return bytes;
}

void CudaConvolutionLayer::CheckPrepared() const {
  SPILL_CHECK(prepared_) << "convolution '" << name() << "' was shaped without a usable GPU ("
                         << why_ << "); it cannot run";
}

ConvCandidate CudaConvolutionLayer::Chosen(int op, const std::vector<int>& algorithms, int slot,
                                           const Workspace& workspace) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<ConvCandidate>& list = algos_[op];
  size_t index = 0;
  if (slot < static_cast<int>(algorithms.size()) && algorithms[slot] >= 0) {
    index = static_cast<size_t>(algorithms[slot]);
  }
  SPILL_CHECK(index < list.size())
      << "convolution '" << name() << "': algorithm " << index << " chosen for the "
      << ConvOpName(op) << ", which has " << list.size() << " candidates";
  const ConvCandidate& a = list[index];
  SPILL_CHECK(workspace.bytes >= a.workspace && (a.workspace == 0 || workspace.data != nullptr))
      << "convolution '" << name() << "': " << a.name << " needs " << a.workspace
      << " bytes of workspace, got " << workspace.bytes;
  return a;
}

void CudaConvolutionLayer::Forward(const ForwardArgs& args) const {
  CheckPrepared();
  CudaDevice& device = cuda::DeviceOf(args.device);
  const ConvCandidate a = Chosen(kConvForward, args.algorithms, 0, args.workspace);
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a.algo);
  const float one = 1.0f, zero = 0.0f;
  const float* x = args.inputs[0].data();
  const float* w = args.params[0].data();
  float* y = args.outputs[0].data();
  const int64_t images = args.inputs[0].shape().n();
  const bool by_image = args.slice.in_image_order();
  SPILL_CHECK(by_image || images == geom_.batch) << name() << ": a slice outside image order";
  const cuda::ConvDescriptors& d = by_image ? image_ : whole_;
  const int64_t x_image = by_image ? args.inputs[0].shape().sample_size() : 0;
  const int64_t y_image = by_image ? args.outputs[0].shape().sample_size() : 0;
  for (int64_t i = 0; i < (by_image ? images : 1); ++i) {
    float* yi = y + i * y_image;
    SPILL_CUDNN_CHECK(cudnnConvolutionForward(device.cudnn(), &one, d.x, x + i * x_image, d.w, w,
                                              d.conv, algo, args.workspace.data,
                                              args.workspace.bytes, &zero, d.y, yi));
    if (bias_) {
      SPILL_CUDNN_CHECK(
          cudnnAddTensor(device.cudnn(), &one, d.bias, args.params[1].data(), &one, d.y, yi));
    }
  }
}

void CudaConvolutionLayer::Backward(const BackwardArgs& args) const {
  CheckPrepared();
  CudaDevice& device = cuda::DeviceOf(args.device);
  if (args.slice.in_image_order()) {
    BackwardByImage(args, device);
  } else {
    SPILL_CHECK(args.inputs[0].shape().n() == geom_.batch)
        << name() << ": a slice outside image order";
    BackwardWhole(args, device);
  }
}

void CudaConvolutionLayer::BackwardWhole(const BackwardArgs& args, CudaDevice& device) const {
  const float one = 1.0f, zero = 0.0f;
  const float* dy = args.output_grads[0].data();
  const cuda::ConvDescriptors& d = whole_;
  if (float* dw = cuda::ParamGrad(args, 0)) {
    const ConvCandidate a = Chosen(kConvFilterGrad, args.algorithms, 0, args.workspace);
    SPILL_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(device.cudnn(), &one, d.x, args.inputs[0].data(), d.y, dy,
                                       d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                       args.workspace.data, args.workspace.bytes, &zero, d.w, dw));
  }
  float* db = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
  if (db != nullptr) {
    SPILL_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(device.cudnn(), &one, d.y, dy, &zero, d.bias, db));
  }
  if (float* dx = cuda::InputGrad(args, 0)) {
    const ConvCandidate a = Chosen(kConvDataGrad, args.algorithms, 1, args.workspace);
    const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
    SPILL_CUDNN_CHECK(
        cudnnConvolutionBackwardData(device.cudnn(), &one, d.w, args.params[0].data(), d.y, dy,
                                     d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                                     args.workspace.data, args.workspace.bytes, &beta, d.x, dx));
  }
}

// Image by image: the filter and bias gradients of the step's first image
// overwrite, every later image's add into them (cuDNN's beta = 1), in
// batch order; each data gradient is its image's own.
void CudaConvolutionLayer::BackwardByImage(const BackwardArgs& args, CudaDevice& device) const {
  const float one = 1.0f, zero = 0.0f;
  const cuda::ConvDescriptors& d = image_;
  const float* x = args.inputs[0].data();
  const float* dy = args.output_grads[0].data();
  const int64_t x_image = args.inputs[0].shape().sample_size();
  const int64_t y_image = args.output_grads[0].shape().sample_size();
  float* dw = cuda::ParamGrad(args, 0);
  float* db = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
  float* dx = cuda::InputGrad(args, 0);
  const float dx_beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
  ConvCandidate filter, data;
  if (dw != nullptr) filter = Chosen(kConvFilterGrad, args.algorithms, 0, args.workspace);
  if (dx != nullptr) data = Chosen(kConvDataGrad, args.algorithms, 1, args.workspace);
  for (const ImageCall& c : ImageCalls(args.slice, args.inputs[0].shape().n())) {
    const float* xi = x + c.index * x_image;
    const float* dyi = dy + c.index * y_image;
    const float* beta = c.first ? &zero : &one;
    if (dw != nullptr) {
      SPILL_CUDNN_CHECK(
          cudnnConvolutionBackwardFilter(device.cudnn(), &one, d.x, xi, d.y, dyi, d.conv,
                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter.algo),
                                         args.workspace.data, args.workspace.bytes, beta, d.w, dw));
    }
    if (db != nullptr) {
      SPILL_CUDNN_CHECK(
          cudnnConvolutionBackwardBias(device.cudnn(), &one, d.y, dyi, beta, d.bias, db));
    }
    if (dx != nullptr) {
      SPILL_CUDNN_CHECK(cudnnConvolutionBackwardData(
          device.cudnn(), &one, d.w, args.params[0].data(), d.y, dyi, d.conv,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(data.algo), args.workspace.data,
          args.workspace.bytes, &dx_beta, d.x, dx + c.index * x_image));
    }
  }
}

SPILL_REGISTER_LAYER(convolution, kCuda, CudaConvolutionLayer);

}  // namespace spill
