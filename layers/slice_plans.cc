#include "layers/slice_plans.h"

namespace spill {

std::vector<ImageCall> ImageCalls(const BatchSlice& slice, int64_t images) {
  std::vector<ImageCall> calls;
  calls.reserve(static_cast<size_t>(images));
  for (int64_t i = 0; i < images; ++i) {
    ImageCall c;
    c.index = i;
    c.image = slice.begin + i;
    c.first = c.image == 0;
    calls.push_back(c);
  }
  return calls;
}

BatchNormForwardPlan PlanBatchNormForward(const BatchSlice& slice, int64_t images, int64_t plane,
                                          Phase phase, bool recompute) {
  BatchNormForwardPlan plan;
  plan.count = static_cast<double>(slice.total(images) * plane);
  plan.start = slice.first();
  const bool statistics = phase == Phase::kTrain && !recompute;
  if (statistics) {
    plan.sums = slice.runs(0);
    plan.squares = slice.runs(1);
    plan.finish = slice.runs(1) && slice.last(images);
  }
  // Evaluation sets the statistics once, before the first normalization.
  plan.from_running = phase == Phase::kEval && slice.runs(2) && slice.first();
  plan.normalize = slice.runs(2);
  return plan;
}

BatchNormBackwardPlan PlanBatchNormBackward(const BatchSlice& slice, int64_t images, int64_t plane,
                                            bool input_grad) {
  BatchNormBackwardPlan plan;
  plan.count = static_cast<double>(slice.total(images) * plane);
  plan.start = slice.first();
  plan.sums = slice.runs(0);
  plan.param_grads = slice.runs(0) && slice.last(images);
  plan.input_grad = input_grad && slice.runs(1);
  return plan;
}

}  // namespace spill
