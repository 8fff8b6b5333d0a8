// max_pool, avg_pool and global_avg_pool on the GPU with the layer's own
// kernels rather than cuDNN: cuDNN has no ceil mode, and its windows at the
// bottom and right edges differ from PoolGeometry::Window (clipped to
// input + pad, as PyTorch and the CPU layer do). One thread per output in
// forward; in backward each input element gathers from the windows that
// cover it, in the CPU's order, so no atomics are needed and the result is
// deterministic. 16-bit tensors are read and written as they are stored
// (stored_cuda.h).
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/pooling_layer.h"

namespace spill {
namespace {

class CudaPoolingLayer : public PoolingLayer {
 public:
  CudaPoolingLayer(LayerParams& params, Kind kind) : PoolingLayer(params, kind) {}

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    const cuda::PoolShape s = ShapeOf(args.inputs[0].shape().n());
    cudaStream_t stream = cuda::StreamOf(args.device);
    const cuda::Stored stored = cuda::StoredOf(args.outputs[0]);
    if (kind_ == Kind::kMax) {
      cuda::LaunchMaxPoolForward(stored, s, args.inputs[0].raw(), args.outputs[0].raw(), stream);
    } else {
      cuda::LaunchAvgPoolForward(stored, s, args.inputs[0].raw(), args.outputs[0].raw(), stream);
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const cuda::PoolShape s = ShapeOf(args.output_grads[0].shape().n());
    cudaStream_t stream = cuda::StreamOf(args.device);
    const bool accumulate = cuda::Accumulates(args, 0);
    const cuda::Stored stored = cuda::StoredOf(args.output_grads[0]);
    if (kind_ == Kind::kMax) {
      cuda::LaunchMaxPoolBackward(stored, s, args.inputs[0].raw(), args.outputs[0].raw(),
                                  args.output_grads[0].raw(), dx, accumulate, stream);
    } else {
      cuda::LaunchAvgPoolBackward(stored, s, args.output_grads[0].raw(), dx, accumulate, stream);
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  // The shape of a call over `images` images (a slice of the batch, or all).
  cuda::PoolShape ShapeOf(int64_t images) const {
    const PoolGeometry& g = geom_;
    cuda::PoolShape s;
    s.planes = images * g.channels;
    cuda::CopyWindow(g, &s);
    s.out_height = g.out_height;
    s.out_width = g.out_width;
    s.count_include_pad = g.count_include_pad;
    return s;
  }
};

class CudaMaxPool : public CudaPoolingLayer {
 public:
  explicit CudaMaxPool(LayerParams& p) : CudaPoolingLayer(p, Kind::kMax) {}
};
class CudaAvgPool : public CudaPoolingLayer {
 public:
  explicit CudaAvgPool(LayerParams& p) : CudaPoolingLayer(p, Kind::kAverage) {}
};
class CudaGlobalAvgPool : public CudaPoolingLayer {
 public:
  explicit CudaGlobalAvgPool(LayerParams& p) : CudaPoolingLayer(p, Kind::kGlobalAverage) {}
};

}  // namespace

SPILL_REGISTER_LAYER(max_pool, kCuda, CudaMaxPool);
SPILL_REGISTER_LAYER(avg_pool, kCuda, CudaAvgPool);
SPILL_REGISTER_LAYER(global_avg_pool, kCuda, CudaGlobalAvgPool);

}  // namespace spill
