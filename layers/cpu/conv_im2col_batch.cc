// im2col_batch: im2col of the whole batch into one column matrix per group
// (C/G*kh*kw x N*Ho*Wo), then one GEMM per group for each op.
// Workspace, the largest of the algorithms: the batch's column matrix
// (C*kh*kw x N*Ho*Wo floats) plus a filter-major copy of the output or output
// gradient (F x N*Ho*Wo floats) for the GEMM to write or read; a batch of one
// image needs no copy, and a pointwise convolution of one image no columns.
//
// This is im2col_chunk's engine (conv_im2col_chunk.cc) with one chunk.
#include <memory>

#include "layers/cpu/conv_im2col_chunk.h"

namespace spill {
namespace cpu {
namespace {

class Im2colBatch : public ConvAlgorithm {
 public:
  Im2colBatch() : engine_(NewIm2colChunked("im2col_batch", 0)) {}

  std::string name() const override { return engine_->name(); }

  size_t WorkspaceBytes(const ConvGeometry& g, ConvOp op) const override {
    return engine_->WorkspaceBytes(g, op);
  }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void* workspace) const override {
    engine_->Forward(g, x, w, bias, y, workspace);
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void* workspace) const override {
    engine_->BackwardData(g, dy, w, dx, accumulate, workspace);
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void* workspace) const override {
    engine_->BackwardFilter(g, x, dy, dw, db, accumulate, bias_sums, workspace);
  }

 private:
  std::unique_ptr<ConvAlgorithm> engine_;
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(Im2colBatch);

}  // namespace cpu
}  // namespace spill
