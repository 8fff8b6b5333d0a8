// convolution on the GPU with cuDNN (see convolution_cuda.h).
//
// Descriptors are made when the layer is shaped - for its batch and for one
// image - and only read afterwards. The candidate lists (algorithm, name,
// workspace) are fixed then too, except that calibration, which runs before
// any memory runtime reads them, may drop candidates cuDNN fails to run;
// indices the runtime chooses stay valid from then on.
#include "layers/cuda/convolution_cuda.h"

#include <algorithm>

#include "framework/base/logging.h"
#include "framework/graph/layer_registry.h"
#include "layers/cuda/conv_bias_kernels_cuda.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

ConvGeometry OneImage(ConvGeometry g) {
  g.batch = 1;
  return g;
}

// The address `offset` bytes into `base` (null stays null).
void* At(void* base, size_t offset) {
  return base == nullptr ? nullptr : static_cast<char*>(base) + offset;
}

}  // namespace

Status CudaConvolutionLayer::Reshape(const std::vector<Shape>& inputs,
                                     std::vector<Shape>* outputs) {
  SPILL_RETURN_IF_ERROR(ConvolutionLayer::Reshape(inputs, outputs));
  SPILL_RETURN_IF_ERROR(CheckDescriptorLimits(name(), geom_));
  return Prepare();
}

// 16 bits where the output is stored in 16 bits: an input stored alike, or
// a float32 one - only the input layers' outputs stay float32 in a 16-bit
// network (framework/graph/precision.h), and they want no gradient - rounded
// into a 16-bit copy in the workspace.
void CudaConvolutionLayer::DtypesChanged() {
  const DType in = input_dtype(0), out = output_dtype(0);
  const DType half = out != DType::kF32 && (in == out || in == DType::kF32) ? out : DType::kF32;
  narrow_input_ = half != DType::kF32 && in == DType::kF32;
  if (half == half_) return;
  half_ = half;
  if (geom_.batch == 0) return;  // not shaped yet: Reshape prepares
  const Status sixteen = Prepare();
  if (sixteen.ok()) return;
  SPILL_LOG_WARNING(kLayers) << "convolution '" << name() << "' computes in float32 on converted "
                             << "copies: " << sixteen.message();
  half_ = DType::kF32;
  narrow_input_ = false;
  const Status wide = Prepare();
  SPILL_CHECK(wide.ok()) << wide.ToString();
}

Status CudaConvolutionLayer::Prepare() {
  geom_.input_dtype = geom_.output_dtype = half_;
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
            Shape(geom_.batch, geom_.channels, geom_.height, geom_.width).ToString() + " " +
            DTypeName(half_) + " input) that runs both on the batch and image by image");
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

CudaConvolutionLayer::Copies CudaConvolutionLayer::Carve(Pass pass,
                                                         const Workspace& workspace) const {
  Copies c;
  size_t at = 0;
  if (half_ != DType::kF32) {
    const size_t weights = static_cast<size_t>(geom_.filters * geom_.col_rows());
    const size_t half = DTypeSize(half_);
    auto take = [&](size_t bytes) {
      void* p = At(workspace.data, at);
      at += cuda::WorkspaceAligned(bytes);
      return p;
    };
    c.w = take(weights * half);
    if (narrow_input_) {
      c.x = take(static_cast<size_t>(geom_.batch * geom_.channels * geom_.in_plane()) * half);
    }
    if (pass == Pass::kBackward) {
      c.dw = take(weights * half);
      c.dw_wide = static_cast<float*>(take(weights * sizeof(float)));
    }
  }
  c.bytes = at;
  c.rest = workspace;
  if (workspace.data != nullptr && at > 0) {
    SPILL_CHECK(workspace.bytes >= at) << "convolution '" << name() << "': its 16-bit copies take "
                                       << at << " bytes of workspace, got " << workspace.bytes;
    c.rest = {workspace.bytes > at ? At(workspace.data, at) : nullptr, workspace.bytes - at};
  }
  return c;
}

void CudaConvolutionLayer::Narrow(CudaDevice& device, const Tensor& param, void* copy) const {
  device.ConvertAsync(copy, half_, param.raw(), DType::kF32, param.shape().numel(),
                      device.compute_queue());
}

void CudaConvolutionLayer::Widen(CudaDevice& device, const void* staged, float* wide, float* grad,
                                 int64_t count, bool first) const {
  if (first) {
    device.ConvertAsync(grad, DType::kF32, staged, half_, count, device.compute_queue());
    return;
  }
  device.ConvertAsync(wide, DType::kF32, staged, half_, count, device.compute_queue());
  cuda::LaunchAxpy(count, 1.0f, wide, grad, device.compute_stream());
  SPILL_CUDA_CHECK_LAUNCH();
}

// cuDNN's workspace sizes are the whole batch's (found for its descriptors);
// a slice's calls get that much. In 16 bits the copies come first.
std::vector<AlgorithmCandidate> CudaConvolutionLayer::algorithm_candidates(Pass pass, int op,
                                                                           int64_t) const {
  if (op < 0 || op >= num_algorithm_ops(pass)) return {};
  const int index = OpIndex(pass, op);
  const size_t copies = CopyBytes(pass);
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<AlgorithmCandidate> candidates;
  for (size_t r = 0; r < algos_[index].size(); ++r) {
    candidates.push_back(
        {algos_[index][r].name, seconds_[index][r], copies + algos_[index][r].workspace});
  }
  return candidates;
}

size_t CudaConvolutionLayer::workspace_bytes(Pass pass) const {
  const size_t copies = CopyBytes(pass);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t bytes = 0;
  for (int op = 0; op < num_algorithm_ops(pass); ++op) {
    const std::vector<ConvCandidate>& list = algos_[OpIndex(pass, op)];
    if (!list.empty()) bytes = std::max(bytes, list[0].workspace);
  }
  return copies + bytes;
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

void CudaConvolutionLayer::CheckStorage(const Tensor& t, DType stored, const char* what) const {
  SPILL_CHECK(t.dtype() == stored) << "convolution '" << name() << "': " << what << " stored as "
                                   << DTypeName(t.dtype()) << ", shaped for " << DTypeName(stored);
}

const char* CudaConvolutionLayer::InputAsComputed(CudaDevice& device, const Tensor& x,
                                                  void* copy) const {
  if (!narrow_input_) return static_cast<const char*>(x.raw());
  device.ConvertAsync(copy, half_, x.raw(), DType::kF32, x.numel(), device.compute_queue());
  return static_cast<const char*>(copy);
}

void CudaConvolutionLayer::Forward(const ForwardArgs& args) const {
  CheckPrepared();
  CheckStorage(args.inputs[0], narrow_input_ ? DType::kF32 : half_, "the input");
  CudaDevice& device = cuda::DeviceOf(args.device);
  const Copies copies = Carve(Pass::kForward, args.workspace);
  const Workspace& ws = copies.rest;
  const ConvCandidate a = Chosen(kConvForward, args.algorithms, 0, ws);
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a.algo);
  const float one = 1.0f, zero = 0.0f;
  const void* w = args.params[0].raw();
  const bool sixteen = copies.w != nullptr;
  if (sixteen) {
    Narrow(device, args.params[0], copies.w);
    w = copies.w;
  }
  const size_t element = DTypeSize(half_);
  const char* x = InputAsComputed(device, args.inputs[0], copies.x);
  char* y = static_cast<char*>(args.outputs[0].raw());
  const int64_t images = args.inputs[0].shape().n();
  const bool by_image = args.slice.in_image_order();
  SPILL_CHECK(by_image || images == geom_.batch) << name() << ": a slice outside image order";
  const cuda::ConvDescriptors& d = by_image ? image_ : whole_;
  const size_t x_image = by_image ? args.inputs[0].shape().sample_size() * element : 0;
  const size_t y_image = by_image ? args.outputs[0].shape().sample_size() * element : 0;
  for (int64_t i = 0; i < (by_image ? images : 1); ++i) {
    char* yi = y + i * y_image;
    SPILL_CUDNN_CHECK(cudnnConvolutionForward(device.cudnn(), &one, d.x, x + i * x_image, d.w, w,
                                              d.conv, algo, ws.data, ws.bytes, &zero, d.y, yi));
    if (!bias_) continue;
    if (sixteen) {
      cuda::LaunchAddChannelBias(cuda::StoredOf(args.outputs[0]), by_image ? 1 : images,
                                 geom_.filters, geom_.out_plane(), args.params[1].data(), yi,
                                 device.compute_stream());
      SPILL_CUDA_CHECK_LAUNCH();
    } else {
      SPILL_CUDNN_CHECK(
          cudnnAddTensor(device.cudnn(), &one, d.bias, args.params[1].data(), &one, d.y, yi));
    }
  }
}

void CudaConvolutionLayer::Backward(const BackwardArgs& args) const {
  CheckPrepared();
  CheckStorage(args.output_grads[0], half_, "the output gradient");
  SPILL_CHECK(!narrow_input_ || cuda::InputGrad(args, 0) == nullptr)
      << "convolution '" << name() << "': a gradient asked of its float32 input";
  CudaDevice& device = cuda::DeviceOf(args.device);
  if (args.slice.in_image_order()) {
    BackwardByImage(args, device);
  } else {
    SPILL_CHECK(args.inputs[0].shape().n() == geom_.batch)
        << name() << ": a slice outside image order";
    BackwardWhole(args, device);
  }
}

// What one backward call reads and writes: cuDNN's operands (16-bit copies
// of the weights and staged gradients in 16 bits) and the float32
// gradients they end in.
struct CudaConvolutionLayer::BackwardOperands {
  Copies copies;
  const void* w = nullptr;  // the weights as cuDNN reads them
  float* dw = nullptr;      // the float32 gradients wanted (null: none)
  float* db = nullptr;
  void* dw_out = nullptr;  // where cuDNN writes the filter gradient
  void* dx = nullptr;      // the input gradient wanted (null: none)
  const char* x = nullptr;
  const char* dy = nullptr;
};

CudaConvolutionLayer::BackwardOperands CudaConvolutionLayer::Operands(const BackwardArgs& args,
                                                                      CudaDevice& device) const {
  BackwardOperands o;
  o.copies = Carve(Pass::kBackward, args.workspace);
  o.dw = cuda::ParamGrad(args, 0);
  o.db = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
  o.dx = cuda::InputGrad(args, 0);
  o.x = o.dw != nullptr ? InputAsComputed(device, args.inputs[0], o.copies.x)
                        : static_cast<const char*>(args.inputs[0].raw());
  o.dy = static_cast<const char*>(args.output_grads[0].raw());
  o.w = args.params[0].raw();
  o.dw_out = o.dw;
  if (o.copies.w != nullptr) {  // 16 bits
    if (o.dx != nullptr) {
      Narrow(device, args.params[0], o.copies.w);
      o.w = o.copies.w;
    }
    o.dw_out = o.copies.dw;
  }
  return o;
}

void CudaConvolutionLayer::BiasGradient(CudaDevice& device, const cuda::ConvDescriptors& d,
                                        const void* dy, int64_t images, float* db,
                                        bool first) const {
  if (half_ == DType::kF32) {
    const float one = 1.0f, zero = 0.0f;
    SPILL_CUDNN_CHECK(cudnnConvolutionBackwardBias(device.cudnn(), &one, d.y, dy,
                                                   first ? &zero : &one, d.bias, db));
    return;
  }
  const cuda::Stored stored = half_ == DType::kBF16 ? cuda::Stored::kBf16 : cuda::Stored::kF16;
  cuda::LaunchChannelSums(stored, images, geom_.filters, geom_.out_plane(), dy, db, !first,
                          device.compute_stream());
  SPILL_CUDA_CHECK_LAUNCH();
}

void CudaConvolutionLayer::BackwardWhole(const BackwardArgs& args, CudaDevice& device) const {
  const float one = 1.0f, zero = 0.0f;
  const BackwardOperands o = Operands(args, device);
  const Workspace& ws = o.copies.rest;
  const cuda::ConvDescriptors& d = whole_;
  const bool staged = o.copies.w != nullptr;
  if (o.dw != nullptr) {
    const ConvCandidate a = Chosen(kConvFilterGrad, args.algorithms, 0, ws);
    SPILL_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(device.cudnn(), &one, d.x, o.x, d.y, o.dy, d.conv,
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                       ws.data, ws.bytes, &zero, d.w, o.dw_out));
    if (staged) Widen(device, o.dw_out, nullptr, o.dw, args.params[0].shape().numel(), true);
  }
  if (o.db != nullptr) BiasGradient(device, d, o.dy, geom_.batch, o.db, true);
  if (o.dx != nullptr) {
    const ConvCandidate a = Chosen(kConvDataGrad, args.algorithms, 1, ws);
    const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
    SPILL_CUDNN_CHECK(cudnnConvolutionBackwardData(
        device.cudnn(), &one, d.w, o.w, d.y, o.dy, d.conv,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws.data, ws.bytes, &beta, d.x, o.dx));
  }
}

// Image by image: the filter and bias gradients of the step's first image
// overwrite, every later image's add into them (cuDNN's beta = 1 in
// float32; in 16 bits each image's staged gradient, widened), in batch
// order; each data gradient is its image's own.
void CudaConvolutionLayer::BackwardByImage(const BackwardArgs& args, CudaDevice& device) const {
  const float one = 1.0f, zero = 0.0f;
  const BackwardOperands o = Operands(args, device);
  const Workspace& ws = o.copies.rest;
  const cuda::ConvDescriptors& d = image_;
  const bool staged = o.copies.w != nullptr;
  const size_t element = DTypeSize(half_);
  const size_t x_image = args.inputs[0].shape().sample_size() * element;
  const size_t y_image = args.output_grads[0].shape().sample_size() * element;
  const float dx_beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
  ConvCandidate filter, data;
  if (o.dw != nullptr) filter = Chosen(kConvFilterGrad, args.algorithms, 0, ws);
  if (o.dx != nullptr) data = Chosen(kConvDataGrad, args.algorithms, 1, ws);
  for (const ImageCall& c : ImageCalls(args.slice, args.inputs[0].shape().n())) {
    const char* xi = o.x + c.index * x_image;
    const char* dyi = o.dy + c.index * y_image;
    // Staged gradients are overwritten and then added; float32 ones added
    // into by cuDNN.
    const float* beta = c.first || staged ? &zero : &one;
    if (o.dw != nullptr) {
      SPILL_CUDNN_CHECK(
          cudnnConvolutionBackwardFilter(device.cudnn(), &one, d.x, xi, d.y, dyi, d.conv,
                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter.algo),
                                         ws.data, ws.bytes, beta, d.w, o.dw_out));
      if (staged) {
        Widen(device, o.dw_out, o.copies.dw_wide, o.dw, args.params[0].shape().numel(), c.first);
      }
    }
    if (o.db != nullptr) BiasGradient(device, d, dyi, 1, o.db, c.first);
    if (o.dx != nullptr) {
      SPILL_CUDNN_CHECK(cudnnConvolutionBackwardData(
          device.cudnn(), &one, d.w, o.w, d.y, dyi, d.conv,
          static_cast<cudnnConvolutionBwdDataAlgo_t>(data.algo), ws.data, ws.bytes, &dx_beta, d.x,
          static_cast<char*>(o.dx) + c.index * x_image));
    }
  }
}

SPILL_REGISTER_LAYER(convolution, kCuda, CudaConvolutionLayer);

}  // namespace spill
