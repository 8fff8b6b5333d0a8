#include "framework/graph/executor.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "framework/base/check.h"
#include "framework/base/clock.h"
#include "framework/base/random.h"
#include "framework/graph/conversions.h"

namespace spill {

Executor::Executor(const Net& net, Device* device, TensorStore& store)
    : net_(net), device_(device), store_(store) {
  const Schedule& schedule = net.schedule();
  readers_.resize(schedule.layers.size());
  for (int reader : schedule.route) {
    const std::vector<TensorId>& inputs = schedule.layers[reader].inputs;
    for (size_t slot = 0; slot < inputs.size(); ++slot) {
      if (inputs[slot] == kNoTensor) continue;
      const int producer = schedule.tensors[inputs[slot]].layer;
      if (producer >= 0) readers_[producer].push_back({reader, static_cast<int>(slot)});
    }
  }
  dropped_input_.assign(schedule.layers.size(), -1);
  skipped_.assign(schedule.layers.size(), 0);
}

uint64_t Executor::LayerSeed(int layer) const {
  return MixSeed(seed_, static_cast<uint64_t>(layer));
}

// In reverse route order every reader of a layer is decided before the
// layer: it belongs to the branch when all its readers do (or are the
// dropped slot itself). Input and loss layers never do.
const std::vector<int>& Executor::Branch(int layer, int input) {
  auto found = branches_.find({layer, input});
  if (found != branches_.end()) return found->second;
  const std::vector<int>& route = net_.schedule().route;
  std::vector<char> in_branch(readers_.size(), 0);
  std::vector<int> branch;
  const auto position = std::find(route.begin(), route.end(), layer);
  for (auto it = std::make_reverse_iterator(position); it != route.rend(); ++it) {
    const int id = *it;
    if (net_.decl(id).is_loss || net_.layer(id).is_input() || readers_[id].empty()) continue;
    bool only_branch = true;
    for (const auto& [reader, slot] : readers_[id]) {
      only_branch &= (reader == layer && slot == input) || in_branch[reader];
    }
    if (!only_branch) continue;
    in_branch[id] = 1;
    branch.push_back(id);
  }
  return branches_[{layer, input}] = std::move(branch);
}

void Executor::DrawDrops() {
  std::fill(dropped_input_.begin(), dropped_input_.end(), -1);
  std::fill(skipped_.begin(), skipped_.end(), 0);
  if (phase_ != Phase::kTrain) return;
  for (int id : net_.schedule().route) {
    const int input = net_.layer(id).DroppedInput(phase_, LayerSeed(id));
    if (input < 0) continue;
    SPILL_CHECK(input < static_cast<int>(net_.schedule().layers[id].inputs.size()))
        << "layer '" << net_.layer(id).name() << "' drops input " << input;
    dropped_input_[id] = input;
    ++depth_stats_.dropped_branches;
    for (int skipped : Branch(id, input)) skipped_[skipped] = 1;
  }
  for (char s : skipped_) depth_stats_.skipped_layers += s;
}

void Executor::ZeroGradients(int layer, const BatchSlice& slice) {
  if (!store_.computes()) return;
  const LayerTensors& lt = net_.schedule().layers[layer];
  auto zero = [&](TensorId id) {
    const Tensor t = View(id);
    device_->MemsetAsync(t.data(), 0, t.bytes(), device_->compute_queue());
  };
  if (slice.first()) {
    for (TensorId grad : lt.param_grads) {
      if (grad != kNoTensor) zero(grad);
    }
  }
  for (size_t i = 0; i < lt.inputs.size(); ++i) {
    if (lt.input_grads[i] == kNoTensor || lt.accumulate[i]) continue;
    if (!skipped_[net_.schedule().tensors[lt.inputs[i]].layer]) zero(lt.input_grads[i]);
  }
}

Tensor Executor::View(TensorId id) {
  if (id == kNoTensor) return Tensor();
  const TensorInfo& info = net_.schedule().tensors[id];
  const Shape& shape = info.shape;
  if (slice_images_ == 0 || !IsTransient(info.kind) || shape.n() != net_.batch()) {
    return Tensor(shape, store_.computes() ? store_.Data(id) : nullptr, info.dtype, info.layout);
  }
  const Shape slice(slice_images_, shape.c(), shape.h(), shape.w());
  if (!store_.computes()) return Tensor(slice, nullptr, info.dtype, info.layout);
  if (float* staged = store_.StagedData(id)) return Tensor(slice, staged, info.dtype, info.layout);
  // In either layout a slice of the batch is a contiguous part of the tensor.
  const size_t offset = slice_begin_ * shape.sample_size() * DTypeSize(info.dtype);
  return Tensor(slice, reinterpret_cast<char*>(store_.Data(id)) + offset, info.dtype, info.layout);
}

int64_t Executor::SliceImages(int layer, Pass pass) const {
  const int64_t streamed = store_.StreamImages();
  if (streamed > 0) return streamed;
  int64_t chunk = store_.BatchChunk();
  chunk = chunk > 0 && chunk < net_.batch() ? chunk : 0;
  const int64_t copies = net_.ConversionSlice(layer, pass);  // the plan's (StepImages)
  return chunk > 0 && copies > 0 ? std::min(chunk, copies) : std::max(chunk, copies);
}

Status Executor::CheckSlices() const {
  const int64_t chunk = store_.BatchChunk();
  if (store_.StreamImages() == 0 && (chunk == 0 || chunk >= net_.batch())) return Status::Ok();
  for (int id : net_.schedule().route) {
    const Layer& layer = net_.layer(id);
    if (!layer.supports_slices()) {
      return InvalidArgument("memory.chunk: layer '" + layer.name() + "' (" + layer.type() +
                             ") cannot compute slices of the batch on this device; use "
                             "memory.chunk: off");
    }
  }
  return Status::Ok();
}

template <typename Call>
void Executor::OverSlices(int layer, Pass pass, Call call) {
  const int64_t chunk = SliceImages(layer, pass), batch = net_.batch();
  const bool streamed = store_.StreamImages() > 0;
  if (chunk == 0) {
    BatchSlice whole;
    whole.image_order = store_.ImageOrder();
    call(whole);
    return;
  }
  const Layer& l = net_.layer(layer);
  slice_sums_.assign(l.slice_sums(pass), 0.0);
  const int sweeps = l.slice_sweeps(pass);
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    for (int64_t begin = 0; begin < batch; begin += chunk) {
      slice_begin_ = begin;
      slice_images_ = std::min(chunk, batch - begin);
      if (streamed) store_.BeginSlice(begin, slice_images_, sweep + 1 == sweeps);
      call(BatchSlice{begin, batch, sweep, slice_sums_.data()});
      if (streamed) store_.EndSlice(begin, slice_images_, sweep + 1 == sweeps);
    }
  }
  slice_begin_ = 0;
  slice_images_ = 0;
}

std::vector<Tensor> Executor::Views(const std::vector<TensorId>& ids) {
  std::vector<Tensor> views;
  views.reserve(ids.size());
  for (TensorId id : ids) views.push_back(View(id));
  return views;
}

// With profiling on, the device's compute queue is drained first, so a span
// is the device's work on the layer, not the host's enqueueing of it (on a
// GPU, a layer's call returns once its kernels are queued).
Executor::Stamp Executor::Now() const {
  if (profiling_ && device_ != nullptr) device_->compute_queue().Synchronize();
  return {MonotonicSeconds(), profiling_ ? ProcessCpuSeconds() : 0.0};
}

void Executor::RunForward(int layer, bool recompute) {
  if (skipped_[layer]) {  // the store still stages the step's slices, as planned
    OverSlices(layer, Pass::kForward, [](const BatchSlice&) {});
    return;
  }
  const Stamp begin = Now();
  OverSlices(layer, Pass::kForward,
             [&](const BatchSlice& slice) { ForwardCall(layer, recompute, slice); });
  Finished(layer, Pass::kForward, recompute, begin);
}

void Executor::ForwardCall(int layer, bool recompute, const BatchSlice& slice) {
  const LayerTensors& lt = net_.schedule().layers[layer];
  ForwardArgs args;
  Conversions copies(device_, store_.StepWorkspace(),
                     !net_.layer(layer).computes_16_bit(Pass::kForward));
  args.inputs = Views(lt.inputs);
  copies.Float(&args.inputs, /*read=*/true, /*written=*/false);
  args.outputs = Views(lt.outputs);
  copies.Float(&args.outputs, /*read=*/false, /*written=*/true);
  copies.ConvertIn();
  args.params = Views(lt.params);
  args.aux = Views(lt.aux);
  args.workspace = copies.rest();
  args.algorithms = store_.StepAlgorithms();
  args.phase = phase_;
  args.recompute = recompute;
  args.seed = LayerSeed(layer);
  args.batch = batch_;
  args.device = device_;
  args.slice = slice;
  net_.layer(layer).Forward(args);
  copies.WriteBack();
}

void Executor::Finished(int layer, Pass pass, bool recompute, const Stamp& begin) {
  if (!profiling_ && !recording_) return;
  const Stamp end = Now();
  if (profiling_) {
    ProfileEntry& e = profile_[net_.layer(layer).type()];
    if (pass == Pass::kForward) {
      e.forward_seconds += end.wall - begin.wall;
      e.forward_cpu_seconds += end.cpu - begin.cpu;
      e.calls++;
    } else {
      e.backward_seconds += end.wall - begin.wall;
      e.backward_cpu_seconds += end.cpu - begin.cpu;
    }
  }
  if (recording_) spans_.push_back({step_, layer, pass, recompute, begin.wall, end.wall});
}

void Executor::RunBackward(int layer) {
  if (skipped_[layer]) {
    OverSlices(layer, Pass::kBackward,
               [&](const BatchSlice& slice) { ZeroGradients(layer, slice); });
    return;
  }
  const Stamp begin = Now();
  OverSlices(layer, Pass::kBackward, [&](const BatchSlice& slice) { BackwardCall(layer, slice); });
  Finished(layer, Pass::kBackward, false, begin);
}

void Executor::BackwardCall(int layer, const BatchSlice& slice) {
  const LayerTensors& lt = net_.schedule().layers[layer];
  const BackwardNeeds& needs = net_.decl(layer).needs;
  BackwardArgs args;
  Conversions copies(device_, store_.StepWorkspace(),
                     !net_.layer(layer).computes_16_bit(Pass::kBackward));
  for (size_t i = 0; i < lt.inputs.size(); ++i) {
    args.inputs.push_back(needs.inputs[i] ? View(lt.inputs[i]) : Tensor());
  }
  copies.Float(&args.inputs, /*read=*/true, /*written=*/false);
  for (TensorId out : lt.outputs) args.outputs.push_back(needs.outputs ? View(out) : Tensor());
  copies.Float(&args.outputs, /*read=*/true, /*written=*/false);
  args.output_grads = Views(lt.output_grads);
  copies.Float(&args.output_grads, /*read=*/true, /*written=*/false);
  args.input_grads = Views(lt.input_grads);
  for (size_t i = 0; i < args.input_grads.size(); ++i) {
    const bool adds = i < lt.accumulate.size() && lt.accumulate[i];
    args.input_grads[i] = copies.Float(args.input_grads[i], /*read=*/adds, /*written=*/true);
  }
  copies.ConvertIn();
  args.accumulate = lt.accumulate;
  args.params = Views(lt.params);
  args.param_grads = Views(lt.param_grads);
  args.aux = Views(lt.aux);
  args.workspace = copies.rest();
  args.algorithms = store_.StepAlgorithms();
  args.device = device_;
  args.slice = slice;
  args.dropped_input = dropped_input_[layer];
  args.loss_scale = loss_scale_;
  net_.layer(layer).Backward(args);
  copies.WriteBack();
}

Status Executor::RunStep(const Step& step) {
  step_ = step.index;
  SPILL_RETURN_IF_ERROR(store_.PrepareStep(step, *this));
  if (step.active && store_.computes()) {
    if (step.pass == Pass::kForward) {
      RunForward(step.layer, /*recompute=*/false);
    } else {
      RunBackward(step.layer);
      if (backward_hook_) backward_hook_(step.layer);
    }
  }
  store_.FinishStep(step);
  return Status::Ok();
}

Status Executor::Recompute(int layer) {
  ++recomputations_;
  if (store_.computes()) RunForward(layer, /*recompute=*/true);
  return Status::Ok();
}

int64_t AddScoreLosses(const float* scores, const float* labels, int64_t images, int64_t classes,
                       int64_t pixels, double* loss, int64_t* correct, int64_t ignored) {
  int64_t scored = 0;
  for (int64_t r = 0; r < images * pixels; ++r) {
    const float* p = scores + (r / pixels) * classes * pixels + r % pixels;
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label == ignored) continue;
    ++scored;
    *loss -= std::log(std::max(p[label * pixels], FLT_MIN));
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j) best = p[j * pixels] > p[best * pixels] ? j : best;
    *correct += best == label;
  }
  return scored;
}

void Executor::ReadLoss(int layer, LossResult* result) {
  TensorId out = net_.schedule().layers[layer].outputs[0];
  const Shape& shape = net_.schedule().tensors[out].shape;
  // Scores are N x classes, or N x classes x H x W with a label per pixel.
  const int64_t n = shape.n(), classes = shape.c(), pixels = shape.h() * shape.w();
  scores_.resize(shape.numel());
  if (store_.StreamImages() > 0) {  // the scores went to host memory slice by slice
    Status status = store_.ReadTensor(out, scores_.data());
    SPILL_CHECK(status.ok()) << status.ToString();
  } else {
    device_->CopySync(scores_.data(), store_.Data(out), shape.bytes(), CopyKind::kDeviceToHost);
  }
  double total = 0;
  int64_t correct = 0;
  const int64_t scored = AddScoreLosses(scores_.data(), batch_->labels, n, classes, pixels, &total,
                                        &correct, net_.layer(layer).ignored_label());
  result->loss += total / static_cast<double>(std::max<int64_t>(scored, 1));
  if (result->count == 0) {
    result->correct = correct;
    result->count = scored;
  }
}

StatusOr<LossResult> Executor::Run(const HostBatch& batch, Phase phase, uint64_t iteration_seed) {
  batch_ = &batch;
  phase_ = phase;
  seed_ = iteration_seed;
  LossResult result;
  const Schedule& schedule = net_.schedule();
  const int n = schedule.num_layers();
  spans_.clear();
  SPILL_RETURN_IF_ERROR(CheckSlices());
  DrawDrops();
  SPILL_RETURN_IF_ERROR(store_.BeginIteration(phase));
  for (int s = 0; s < n; ++s) {
    const Step& step = schedule.steps[s];
    step_ = s;
    SPILL_RETURN_IF_ERROR(store_.PrepareStep(step, *this));
    if (store_.computes()) {
      RunForward(step.layer, /*recompute=*/false);
      if (net_.decl(step.layer).is_loss) ReadLoss(step.layer, &result);
    }
    store_.FinishStep(step);
  }
  if (phase == Phase::kTrain) {
    for (int s = n; s < 2 * n; ++s) SPILL_RETURN_IF_ERROR(RunStep(schedule.steps[s]));
  }
  SPILL_RETURN_IF_ERROR(store_.EndIteration());
  return result;
}

std::string Executor::ProfileTable() const {
  std::ostringstream out;
  double total = 0, total_cpu = 0;
  for (const auto& [type, e] : profile_) {
    total += e.forward_seconds + e.backward_seconds;
    total_cpu += e.forward_cpu_seconds + e.backward_cpu_seconds;
  }
  char line[200];
  std::snprintf(line, sizeof(line), "%-18s %10s %10s %7s %10s %10s %7s\n", "layer type",
                "forward s", "backward s", "share", "fwd cpu s", "bwd cpu s", "share");
  out << line;
  for (const auto& [type, e] : profile_) {
    const double cpu = e.forward_cpu_seconds + e.backward_cpu_seconds;
    std::snprintf(line, sizeof(line), "%-18s %10.3f %10.3f %6.1f%% %10.3f %10.3f %6.1f%%\n",
                  type.c_str(), e.forward_seconds, e.backward_seconds,
                  100 * (e.forward_seconds + e.backward_seconds) / std::max(total, 1e-9),
                  e.forward_cpu_seconds, e.backward_cpu_seconds,
                  100 * cpu / std::max(total_cpu, 1e-9));
    out << line;
  }
  return out.str();
}

}  // namespace spill
