// DataParallel: the collectives around the training loop (policy in
// data_parallel.h). Everything here runs on the training thread and uses the
// control channel; the gradient buckets use their own thread and channel.
#include "tools/trainer/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "framework/distributed/replica_sum.h"

namespace spill {
namespace {

// A contiguous slice [begin, begin + size) of another dataset.
class ShardView : public Dataset {
 public:
  ShardView(const Dataset& base, int64_t begin, int64_t size)
      : base_(base), begin_(begin), size_(size) {}
  int64_t size() const override { return size_; }
  int num_classes() const override { return base_.num_classes(); }
  Shape example_shape() const override { return base_.example_shape(); }
  std::string Describe() const override {
    return base_.Describe() + " [" + std::to_string(begin_) + ", " +
           std::to_string(begin_ + size_) + ")";
  }
  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override {
    return base_.Get(begin_ + index, augment_seed, image);
  }
  Shape label_shape() const override { return base_.label_shape(); }
  Status GetPixelLabels(int64_t index, float* labels) const override {
    return base_.GetPixelLabels(begin_ + index, labels);
  }

 private:
  const Dataset& base_;
  int64_t begin_, size_;
};

// FNV-1a over bytes: equal parameters give equal hashes on every rank.
uint64_t Fnv1a(const void* data, size_t bytes, uint64_t hash) {
  constexpr uint64_t kPrime = 1099511628211ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * kPrime;
  return hash;
}
constexpr uint64_t kFnvOffset = 14695981039346656037ull;

// Sums for synchronized batch norm; a failed collective leaves the ranks
// with different statistics, so it ends the job.
void SumOrAbort(Communicator& comm, double* values, int64_t n) {
  Status status = comm.SumDoubles(values, n, Channel::kControl);
  if (status.ok()) return;
  std::fprintf(stderr, "train (%s): sync_batch_norm: %s\n", comm.Describe().c_str(),
               status.message().c_str());
  comm.Abort(1);
}

// On rank 0: every rank's pieces of one array per slot, packed in slot
// order from `at[rank]` on (which advances past them), into each slot's
// whole array `whole(slot)`.
void UnpackPieces(const std::vector<std::vector<float>>& arrived,
                  const std::vector<Solver::Slot>& slots, int64_t total, std::vector<int64_t>* at,
                  const std::function<std::vector<float>&(size_t)>& whole) {
  const int ranks = static_cast<int>(arrived.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    std::vector<float>& to = whole(i);
    to.resize(slots[i].numel);
    for (int r = 0; r < ranks; ++r) {
      const Piece piece = PieceOf(slots[i].offset, slots[i].numel, total, r, ranks);
      std::copy_n(arrived[r].data() + (*at)[r], piece.size(), to.data() + piece.begin);
      (*at)[r] += piece.size();
    }
  }
}

// Whether `id` is a rank's piece of a sharded parameter (zero 3).
bool IsPiece(const Schedule& s, TensorId id) {
  return std::any_of(s.parameters.begin(), s.parameters.end(),
                     [id](const ParameterSlot& p) { return p.master == id; });
}

}  // namespace

StatusOr<int64_t> DataParallel::RankBatch(const TrainConfig& config) {
  const int ranks = Communicator::World().size();
  if (config.data.batch % ranks != 0) {
    return InvalidArgument(config.file + ": data.batch is the global batch, " +
                           std::to_string(config.data.batch) + ", which " + std::to_string(ranks) +
                           " ranks cannot split evenly; give a multiple " + "of " +
                           std::to_string(ranks));
  }
  return config.data.batch / ranks;
}

StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(const TrainConfig& config,
                                                             const Net& net, Device* device,
                                                             MemoryRuntime& runtime,
                                                             Executor& executor) {
  Communicator& comm = Communicator::World();
  if (comm.size() == 1) return std::unique_ptr<DataParallel>();
  const DistributedConfig& d = config.distributed;
  if (d.sync_batch_norm && device->type() != DeviceType::kCpu) {
    return InvalidArgument(config.file +
                           ": distributed.sync_batch_norm runs on the CPU device only for now");
  }
  if (d.sync_batch_norm && config.memory.batch_chunk != kBatchChunkOff) {
    return InvalidArgument(config.file +
                           ": distributed.sync_batch_norm needs whole batches; set memory.chunk: "
                           "off");
  }
  std::unique_ptr<DataParallel> dp(new DataParallel(comm, d));
  dp->device_ = device;
  dp->params_on_device_ = config.memory.params.kind == ParamPlacement::Kind::kDevice;
  // Updates during backward (parameters in host memory) need per-layer buckets.
  const bool per_layer = config.memory.params.kind != ParamPlacement::Kind::kDevice;
  dp->reducer_ = std::make_unique<GradientReducer>(comm, net, device, runtime, d.bucket_bytes,
                                                   per_layer, /*gather=*/d.zero == 0);
  dp->solver_store_ =
      std::make_unique<ReducingStore>(runtime, *dp->reducer_, net.schedule(), device);
  GradientReducer* reducer = dp->reducer_.get();
  executor.set_backward_hook([reducer](int layer) { reducer->OnBackward(layer); });
  if (runtime.options().params_gathered) {
    dp->runtime_ = &runtime;
    dp->schedule_ = &net.schedule();
    const std::vector<ParameterSlot>& slots = net.schedule().parameters;
    for (size_t i = 0; i < slots.size(); ++i) {
      dp->sharded_[slots[i].param] = {i, dp->trainable_};
      dp->trainable_ += net.schedule().tensors[slots[i].param].shape.numel();
    }
    runtime.set_parameter_gatherer(dp.get());
    dp->gather_thread_ = std::thread([self = dp.get()] { self->GatherLoop(); });
  }
  if (d.sync_batch_norm) {
    SetReplicaSum([&comm](double* values, int64_t n) { SumOrAbort(comm, values, n); });
  }
  return dp;
}

DataParallel::~DataParallel() {
  if (config_.sync_batch_norm) SetReplicaSum(nullptr);
  if (gather_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(gather_mutex_);
      gather_stopping_ = true;
    }
    gather_work_.notify_all();
    gather_thread_.join();
  }
  for (const auto& g : retiring_) g->copied->Synchronize();
}

StateShard DataParallel::ShardFor(const TrainConfig& config) {
  // Stage 2 shards the state as stage 1 does; stage 3 the parameters too.
  const Communicator& comm = Communicator::World();
  if (config.distributed.zero == 0) return {};
  return {comm.rank(), comm.size(), config.distributed.zero >= 3};
}

Status DataParallel::Synchronize(const Net& net, TensorStore& store, Solver* solver,
                                 TrainingPosition* position, const WholeState* whole) {
  const bool sharded = solver->shard().sharded();
  int64_t where[6] = {position->step,  position->epoch,  position->batch,
                      solver->steps(), whole != nullptr, position->loss_scale_clean_steps};
  double loss_scale = position->loss_scale;  // fp16's, a power of two
  SPILL_RETURN_IF_ERROR(comm_.Broadcast(where, sizeof(where), Channel::kControl));
  SPILL_RETURN_IF_ERROR(comm_.Broadcast(&loss_scale, sizeof(loss_scale), Channel::kControl));
  *position = {where[0], where[1], where[2], where[3], loss_scale, where[5]};
  solver->set_steps(where[3]);
  const Schedule& s = net.schedule();
  std::vector<float> buffer;
  for (size_t id = 0; id < s.tensors.size(); ++id) {
    const TensorInfo& info = s.tensors[id];
    if (info.kind != TensorKind::kParam && (info.kind != TensorKind::kOptimizerState || sharded)) {
      continue;
    }
    const TensorId t = static_cast<TensorId>(id);
    // Sharded parameters: every rank initialized, or read, its own pieces.
    if (runtime_ != nullptr && (sharded_.count(t) > 0 || IsPiece(s, t))) continue;
    buffer.resize(info.shape.numel());
    if (rank() == 0) SPILL_RETURN_IF_ERROR(store.ReadTensor(t, buffer.data()));
    SPILL_RETURN_IF_ERROR(comm_.Broadcast(buffer.data(), info.bytes, Channel::kControl));
    if (rank() != 0) SPILL_RETURN_IF_ERROR(store.WriteTensor(t, buffer.data()));
  }
  if (!sharded || where[4] == 0) return Status::Ok();
  // Resuming sharded: rank 0 read the whole state; each rank keeps its pieces.
  for (size_t i = 0; i < solver->slots().size(); ++i) {
    const Solver::Slot& slot = solver->slots()[i];
    for (int k = 0; k < solver->states(); ++k) {
      buffer.assign(slot.numel, 0.0f);
      if (rank() == 0) buffer = (*whole)[i][k];
      SPILL_RETURN_IF_ERROR(
          comm_.Broadcast(buffer.data(), slot.numel * sizeof(float), Channel::kControl));
      if (!slot.piece.empty()) {
        SPILL_RETURN_IF_ERROR(store.WriteTensor(slot.state[k], buffer.data() + slot.piece.begin));
      }
    }
  }
  return Status::Ok();
}

void DataParallel::Begin(TensorId param) {
  // Values whose copy to the device is done can go.
  retiring_.erase(std::remove_if(retiring_.begin(), retiring_.end(),
                                 [](const auto& g) { return g->copied->IsComplete(); }),
                  retiring_.end());
  auto g = std::make_shared<Gathering>();
  g->param = param;
  const Schedule& s = *schedule_;
  const int64_t numel = s.tensors[param].shape.numel();
  g->values.resize(numel);
  const Sharded& at = sharded_.at(param);
  const Piece mine = PieceOf(at.offset, numel, trainable_, rank(), size());
  if (!mine.empty()) {
    const ParameterSlot& slot = s.parameters[at.slot];
    device_->CopyAsync(g->values.data() + mine.begin, runtime_->Data(slot.master),
                       mine.size() * sizeof(float), CopyKind::kDeviceToHost,
                       device_->compute_queue());
    g->piece_read = device_->compute_queue().Record();
  }
  {
    std::lock_guard<std::mutex> lock(gather_mutex_);
    gathers_[param] = g;
    gather_queue_.push_back(g);
  }
  gather_work_.notify_one();
}

Status DataParallel::Finish(TensorId param, float* data) {
  std::shared_ptr<Gathering> g;
  {
    std::unique_lock<std::mutex> lock(gather_mutex_);
    auto it = gathers_.find(param);
    if (it == gathers_.end()) {
      return Internal("'" + schedule_->tensors[param].name + "' was not being gathered");
    }
    g = it->second;
    gathers_.erase(it);
    gather_done_.wait(lock, [&] { return g->done; });
  }
  SPILL_RETURN_IF_ERROR(g->status);
  if (data == nullptr) return Status::Ok();
  device_->CopyAsync(data, g->values.data(), g->values.size() * sizeof(float),
                     CopyKind::kHostToDevice, device_->compute_queue());
  g->copied = device_->compute_queue().Record();
  retiring_.push_back(std::move(g));
  return Status::Ok();
}

void DataParallel::GatherLoop() {
  for (;;) {
    std::shared_ptr<Gathering> g;
    {
      std::unique_lock<std::mutex> lock(gather_mutex_);
      gather_work_.wait(lock, [&] { return gather_stopping_ || !gather_queue_.empty(); });
      if (gather_queue_.empty()) return;
      g = gather_queue_.front();
      gather_queue_.pop_front();
    }
    Status status = AllGather(*g);
    {
      std::lock_guard<std::mutex> lock(gather_mutex_);
      g->status = std::move(status);
      g->done = true;
    }
    gather_done_.notify_all();
  }
}

// On the gather thread: every rank's piece to every other rank.
Status DataParallel::AllGather(Gathering& g) {
  const Schedule& s = *schedule_;
  // Ranks whose plans differ would wait for each other's messages forever.
  uint64_t low = 0, high = 0;
  SPILL_RETURN_IF_ERROR(
      comm_.MinMax(static_cast<uint64_t>(g.param), &low, &high, Channel::kParameters));
  if (low != high) {
    return Internal("the ranks gather different parameters at this point ('" + s.tensors[low].name +
                    "' and '" + s.tensors[high].name + "'): their memory plans differ");
  }
  if (g.piece_read) g.piece_read->Synchronize();
  const int me = rank(), ranks = size();
  const int64_t numel = static_cast<int64_t>(g.values.size()), offset = sharded_.at(g.param).offset;
  const Piece mine = PieceOf(offset, numel, trainable_, me, ranks);
  std::vector<Communicator::Message> sends, receives;
  for (int r = 0; r < ranks; ++r) {
    const Piece theirs = PieceOf(offset, numel, trainable_, r, ranks);
    if (r == me) continue;
    if (!mine.empty()) sends.push_back({r, g.values.data() + mine.begin, mine.size()});
    if (!theirs.empty()) receives.push_back({r, g.values.data() + theirs.begin, theirs.size()});
  }
  return comm_.Exchange(sends, receives, 2, Channel::kParameters);
}

Status DataParallel::SendToRankZero(std::vector<float> own, int64_t total, int times, int tag,
                                    std::vector<std::vector<float>>* arrived) {
  const int me = rank(), ranks = size();
  arrived->assign(ranks, {});
  std::vector<Communicator::Message> sends, receives;
  if (me != 0) {
    sends.push_back({0, own.data(), static_cast<int64_t>(own.size())});
    outside_steps_floats_ += static_cast<int64_t>(own.size());
  } else {
    for (int r = 1; r < ranks; ++r) {
      (*arrived)[r].resize(times * RangeOf(total, r, ranks).size());
      receives.push_back({r, (*arrived)[r].data(), static_cast<int64_t>((*arrived)[r].size())});
    }
  }
  SPILL_RETURN_IF_ERROR(comm_.Exchange(sends, receives, tag, Channel::kControl));
  if (me == 0) (*arrived)[0] = std::move(own);
  return Status::Ok();
}

Status DataParallel::GatherWholeParameters(const Net& net, TensorStore& store, const Solver& solver,
                                           WholeParameters* whole) {
  const int ranks = size();
  const int64_t total = TrainableElements(net.schedule());
  const auto& slots = solver.slots();
  std::vector<float> own, values;  // this rank's pieces, in slot order
  for (size_t i = 0; i < slots.size(); ++i) {
    const ParameterSlot& p = net.schedule().parameters[i];
    if (p.master == kNoTensor) continue;
    values.resize(slots[i].piece.size());
    SPILL_RETURN_IF_ERROR(store.ReadTensor(p.master, values.data()));
    own.insert(own.end(), values.begin(), values.end());
  }
  std::vector<std::vector<float>> arrived;
  SPILL_RETURN_IF_ERROR(SendToRankZero(std::move(own), total, 1, 3, &arrived));
  if (rank() != 0) return Status::Ok();
  std::vector<int64_t> at(ranks, 0);
  UnpackPieces(arrived, slots, total, &at,
               [&](size_t i) -> std::vector<float>& { return (*whole)[slots[i].param]; });
  return Status::Ok();
}

// All-gather: each rank's updated pieces, packed in slot order, go to every
// other rank; nothing is added, so every rank ends with the same bits.
Status DataParallel::GatherParameters(const Net& net, TensorStore& store, const Solver& solver) {
  const int me = rank(), ranks = size();
  const auto& slots = solver.slots();
  const int64_t total = TrainableElements(net.schedule());
  std::vector<std::vector<float>> packed(ranks);  // each rank's range
  for (int r = 0; r < ranks; ++r) packed[r].resize(RangeOf(total, r, ranks).size());
  // Where each rank's pieces are in its range, slot by slot.
  std::vector<std::vector<PieceCopy>> copies(ranks);
  std::vector<int64_t> at(ranks, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int r = 0; r < ranks; ++r) {
      const Piece piece = PieceOf(slots[i].offset, slots[i].numel, total, r, ranks);
      if (piece.empty()) continue;
      copies[r].push_back({i, piece, packed[r].data() + at[r]});
      at[r] += piece.size();
    }
  }
  SPILL_RETURN_IF_ERROR(ReadPieces(store, solver, copies[me]));
  std::vector<Communicator::Message> sends, receives;
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    sends.push_back({r, packed[me].data(), static_cast<int64_t>(packed[me].size())});
    receives.push_back({r, packed[r].data(), static_cast<int64_t>(packed[r].size())});
  }
  SPILL_RETURN_IF_ERROR(comm_.Exchange(sends, receives, 0, Channel::kControl));
  std::vector<PieceCopy> theirs;
  for (int r = 0; r < ranks; ++r) {
    if (r != me) theirs.insert(theirs.end(), copies[r].begin(), copies[r].end());
  }
  std::stable_sort(theirs.begin(), theirs.end(),
                   [](const PieceCopy& a, const PieceCopy& b) { return a.slot < b.slot; });
  return WritePieces(store, solver, theirs);
}

Status DataParallel::ReadPieces(TensorStore& store, const Solver& solver,
                                const std::vector<PieceCopy>& copies) {
  const auto& slots = solver.slots();
  if (params_on_device_) {
    for (const PieceCopy& c : copies) {
      device_->CopyAsync(c.host, store.Data(slots[c.slot].param) + c.piece.begin,
                         c.piece.size() * sizeof(float), CopyKind::kDeviceToHost,
                         device_->compute_queue());
    }
    device_->compute_queue().Synchronize();
    return Status::Ok();
  }
  std::vector<float> values;
  for (const PieceCopy& c : copies) {
    values.resize(slots[c.slot].numel);
    SPILL_RETURN_IF_ERROR(store.ReadTensor(slots[c.slot].param, values.data()));
    std::copy_n(values.data() + c.piece.begin, c.piece.size(), c.host);
  }
  return Status::Ok();
}

Status DataParallel::WritePieces(TensorStore& store, const Solver& solver,
                                 const std::vector<PieceCopy>& copies) {
  const auto& slots = solver.slots();
  if (params_on_device_) {
    for (const PieceCopy& c : copies) {
      device_->CopyAsync(store.Data(slots[c.slot].param) + c.piece.begin, c.host,
                         c.piece.size() * sizeof(float), CopyKind::kHostToDevice,
                         device_->compute_queue());
    }
    device_->compute_queue().Synchronize();
    return Status::Ok();
  }
  // A parameter at a time, with every piece of it.
  std::vector<float> values;
  for (size_t k = 0; k < copies.size();) {
    const size_t slot = copies[k].slot;
    values.resize(slots[slot].numel);
    SPILL_RETURN_IF_ERROR(store.ReadTensor(slots[slot].param, values.data()));
    for (; k < copies.size() && copies[k].slot == slot; ++k) {
      std::copy_n(copies[k].host, copies[k].piece.size(), values.data() + copies[k].piece.begin);
    }
    SPILL_RETURN_IF_ERROR(store.WriteTensor(slots[slot].param, values.data()));
  }
  return Status::Ok();
}

Status DataParallel::GatherState(const Net& net, TensorStore& store, const Solver& solver,
                                 WholeState* whole) {
  const int me = rank(), ranks = size();
  const int64_t total = TrainableElements(net.schedule());
  const auto& slots = solver.slots();
  const int states = solver.states();
  // This rank's pieces, state by state, in slot order.
  std::vector<float> own, values;
  for (int k = 0; k < states; ++k) {
    for (const Solver::Slot& slot : slots) {
      if (slot.piece.empty()) continue;
      values.resize(slot.piece.size());
      SPILL_RETURN_IF_ERROR(store.ReadTensor(slot.state[k], values.data()));
      own.insert(own.end(), values.begin(), values.end());
    }
  }
  std::vector<std::vector<float>> arrived;
  SPILL_RETURN_IF_ERROR(SendToRankZero(std::move(own), total, states, 1, &arrived));
  if (me != 0) return Status::Ok();
  whole->assign(slots.size(), std::vector<std::vector<float>>(states));
  std::vector<int64_t> at(ranks, 0);
  for (int k = 0; k < states; ++k) {
    UnpackPieces(arrived, slots, total, &at,
                 [&](size_t i) -> std::vector<float>& { return (*whole)[i][k]; });
  }
  return Status::Ok();
}

ReducerStats DataParallel::stats() const {
  ReducerStats stats = reducer_->stats();
  stats.floats_sent = comm_.floats_sent() - outside_steps_floats_;
  return stats;
}

StatusOr<bool> DataParallel::Unscale(float factor) {
  SPILL_ASSIGN_OR_RETURN(const bool finite, reducer_->Unscale(factor));
  uint64_t low = 0, high = 0;
  SPILL_RETURN_IF_ERROR(comm_.MinMax(finite ? 1 : 0, &low, &high, Channel::kControl));
  return low == 1;
}

Status DataParallel::FinishStep(const Net& net, TensorStore& store, const Solver& solver,
                                int64_t step, bool stop_here, LossResult* result, bool* stop) {
  SPILL_RETURN_IF_ERROR(reducer_->FinishIteration());
  // Sharded parameters are gathered when the next steps read them.
  if (solver.shard().sharded() && !solver.shard().shards_params()) {
    SPILL_RETURN_IF_ERROR(GatherParameters(net, store, solver));
  }
  // Each rank's loss is the mean over its equal slice: the global batch's
  // mean is their mean.
  double figures[4] = {result->loss, static_cast<double>(result->correct),
                       static_cast<double>(result->count), stop_here ? 1.0 : 0.0};
  SPILL_RETURN_IF_ERROR(comm_.SumDoubles(figures, 4, Channel::kControl));
  result->loss = figures[0] / size();
  result->correct = static_cast<int64_t>(figures[1]);
  result->count = static_cast<int64_t>(figures[2]);
  *stop = figures[3] > 0;
  if (config_.check_replicas) SPILL_RETURN_IF_ERROR(CheckReplicas(net, store, solver, step));
  return Status::Ok();
}

// Trainable parameters and (replicated) solver state; batch norm's running
// statistics are per rank unless synchronized, so they are not compared.
Status DataParallel::CheckReplicas(const Net& net, TensorStore& store, const Solver& solver,
                                   int64_t step) {
  uint64_t hash = kFnvOffset;
  std::vector<float> buffer;
  for (const Solver::Slot& slot : solver.slots()) {
    std::vector<TensorId> tensors = {slot.param};
    if (!solver.shard().sharded()) {
      tensors.insert(tensors.end(), slot.state.begin(), slot.state.end());
    }
    for (TensorId t : tensors) {
      const TensorInfo& info = net.schedule().tensors[t];
      buffer.resize(info.shape.numel());
      SPILL_RETURN_IF_ERROR(store.ReadTensor(t, buffer.data()));
      hash = Fnv1a(buffer.data(), info.bytes, hash);
    }
  }
  uint64_t low = 0, high = 0;
  SPILL_RETURN_IF_ERROR(comm_.MinMax(hash, &low, &high, Channel::kControl));
  if (low != high) {
    return Internal("after step " + std::to_string(step) +
                    " the ranks hold different parameters (distributed.check_replicas)");
  }
  return Status::Ok();
}

std::unique_ptr<Dataset> DataParallel::TestShard(const Dataset& data) const {
  const int64_t n = data.size(), r = rank(), ranks = size();
  const int64_t begin = n * r / ranks, end = n * (r + 1) / ranks;
  return std::make_unique<ShardView>(data, begin, end - begin);
}

int64_t DataParallel::TestBatches(const Dataset& data, int64_t batch) const {
  if (runtime_ == nullptr) return 0;
  const int64_t n = data.size(), ranks = size();
  int64_t most = 0;
  for (int64_t r = 0; r < ranks; ++r) most = std::max(most, n * (r + 1) / ranks - n * r / ranks);
  return (most + batch - 1) / batch;
}

Status DataParallel::ReduceEval(EvalResult* result) {
  double figures[3] = {result->loss * result->count, static_cast<double>(result->correct),
                       static_cast<double>(result->count)};
  SPILL_RETURN_IF_ERROR(comm_.SumDoubles(figures, 3, Channel::kControl));
  result->correct = static_cast<int64_t>(figures[1]);
  result->count = static_cast<int64_t>(figures[2]);
  const double count = std::max(figures[2], 1.0);
  result->loss = figures[0] / count;
  result->accuracy = figures[1] / count;
  return Status::Ok();
}

}  // namespace spill
