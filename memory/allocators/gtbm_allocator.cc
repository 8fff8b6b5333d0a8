#include "memory/allocators/gtbm_allocator.h"

#include <algorithm>
#include <map>

namespace spill {
namespace {

size_t WholeBlocks(size_t bytes) { return bytes / kPoolBlockBytes * kPoolBlockBytes; }

// The pool the stacking rules are compared in: roomy, so that no replay fails.
constexpr size_t kReplayCapacity = size_t{1} << 50;
constexpr GtbmStacking kStackingRules[] = {GtbmStacking::kNone, GtbmStacking::kPrefetched,
                                           GtbmStacking::kMovables};

// Whether a profiled or live request is a reclaimed tensor's.
bool Reclaimed(TensorId tensor, int step, const Schedule& schedule,
               const MobilityClasses& classes) {
  if (tensor == kNoTensor || step < 0) return false;
  return classes.Of(tensor, schedule.steps[step].pass) == Mobility::kReclaimed;
}

}  // namespace

const char* GtbmStackingName(GtbmStacking stacking) {
  switch (stacking) {
    case GtbmStacking::kNone:
      return "none";
    case GtbmStacking::kPrefetched:
      return "prefetched";
    case GtbmStacking::kMovables:
      return "movables";
  }
  return "?";
}

GtbmAllocator::GtbmAllocator(size_t capacity, size_t incremental_bytes, const NetworkView& view,
                             MobilityClasses classes, bool soft, GtbmStacking stacking)
    : DeviceAllocator(capacity),
      view_(view),
      soft_(soft),
      stacking_(stacking),
      main_size_(WholeBlocks(capacity) -
                 std::min(WholeBlocks(incremental_bytes), WholeBlocks(capacity))),
      incremental_size_(WholeBlocks(capacity) - main_size_),
      pool_(main_size_, FitPolicy::kBestFit),
      incremental_(incremental_size_, FitPolicy::kBestFit),
      classes_(std::move(classes)),
      train_(AnalyzeLiveness(*view.schedule, Phase::kTrain)),
      eval_(AnalyzeLiveness(*view.schedule, Phase::kEval)),
      squeeze_gap_(main_size_) {}

Mobility GtbmAllocator::Classify(const AllocRequest& request) const {
  if (request.tensor == kNoTensor) return Mobility::kMovable;  // a workspace
  const Schedule& schedule = *view_.schedule;
  // Outside the steps: kept for good (persistent state; every tensor when
  // liveness is off).
  if (!IsTransient(schedule.tensors[request.tensor].kind) || request.step < 0) {
    return Mobility::kPersistent;
  }
  return classes_.Of(request.tensor, schedule.steps[request.step].pass);
}

Status GtbmAllocator::BeginIteration(Phase phase) {
  phase_ = phase;
  return Status::Ok();
}

std::vector<TensorId> GtbmAllocator::PlacementOrder(const Step& step) const {
  std::vector<TensorId> order = step.writes;
  const Schedule& schedule = *view_.schedule;
  auto temporary = [&](TensorId t) {
    return IsTransient(schedule.tensors[t].kind) &&
           classes_.Of(t, step.pass) == Mobility::kTemporary;
  };
  auto first_temporary =
      std::stable_partition(order.begin(), order.end(), [&](TensorId t) { return !temporary(t); });
  const std::vector<int>& last_use = (phase_ == Phase::kTrain ? train_ : eval_).last_use;
  std::stable_sort(first_temporary, order.end(),
                   [&](TensorId a, TensorId b) { return last_use[a] > last_use[b]; });
  return order;
}

size_t GtbmAllocator::LowFrontier() const {
  return low_.empty() ? 0 : low_.rbegin()->first + low_.rbegin()->second;
}

size_t GtbmAllocator::HighFrontier() const {
  return high_.empty() ? main_size_ : high_.begin()->first;
}

void GtbmAllocator::NoteFrontiers() {
  const size_t low = LowFrontier(), high = HighFrontier();
  squeeze_gap_ = std::min(squeeze_gap_, high > low ? high - low : 0);  // crossed: soft only
}

size_t GtbmAllocator::Extent() const {
  const size_t low = LowFrontier(), high = HighFrontier();
  return (high > low ? low + (main_size_ - high) : main_size_) + incremental_.LiveEnd();
}

StatusOr<size_t> GtbmAllocator::Place(const AllocRequest& request, size_t bytes, AllocationId id) {
  const Mobility mobility = Classify(request);
  const int leave = LeaveStep(request);
  if (mobility == Mobility::kReclaimed) {
    StatusOr<Allocation> block = incremental_.Allocate(bytes, request.category);
    if (block.ok()) {
      blocks_[id] = {Arena::kIncremental, block->id, block->offset, block->bytes};
      return main_size_ + block->offset;
    }
    SPILL_ASSIGN_OR_RETURN(size_t offset,
                           PlaceInMain(Arena::kHigh, request.category, bytes, id, leave));
    ++overflows_;
    return offset;
  }
  if (mobility == Mobility::kMovable && JoinsStack(request, leave)) {
    StatusOr<size_t> offset = PlaceOnStack(request, bytes, id, leave);
    if (offset.ok()) return offset;
  }
  return PlaceInMain(mobility == Mobility::kTemporary ? Arena::kHigh : Arena::kLow,
                     request.category, bytes, id, leave);
}

int GtbmAllocator::LeaveStep(const AllocRequest& request) const {
  if (request.tensor == kNoTensor) return request.step;  // a workspace
  return (phase_ == Phase::kTrain ? train_ : eval_).last_use[request.tensor];
}

bool GtbmAllocator::JoinsStack(const AllocRequest& request, int leave) const {
  if (stacking_ == GtbmStacking::kNone || request.step < 0 || leave < 0) return false;
  const Schedule& schedule = *view_.schedule;
  if (schedule.steps[request.step].pass != Pass::kBackward) return false;
  const bool brought_back = request.tensor != kNoTensor &&
                            (schedule.tensors[request.tensor].kind == TensorKind::kActivation ||
                             schedule.tensors[request.tensor].kind == TensorKind::kAux);
  if (stacking_ == GtbmStacking::kPrefetched && !brought_back) return false;
  if (high_.empty()) return stacking_ == GtbmStacking::kPrefetched;
  return leave <= high_leave_.at(high_.begin()->first);  // leaves before the top
}

StatusOr<size_t> GtbmAllocator::PlaceOnStack(const AllocRequest& request, size_t bytes,
                                             AllocationId id, int leave) {
  // The top of the gap between the frontiers: right below the lowest block.
  SPILL_ASSIGN_OR_RETURN(Allocation block,
                         pool_.Allocate(bytes, request.category, Placement::kTopDown,
                                        {LowFrontier(), HighFrontier()}));
  blocks_[id] = {Arena::kHigh, block.id, block.offset, block.bytes};
  high_.insert({block.offset, block.bytes});
  high_leave_[block.offset] = leave;
  ++stacked_;
  NoteFrontiers();
  return block.offset;
}

StatusOr<size_t> GtbmAllocator::PlaceInMain(Arena arena, MemoryCategory category, size_t bytes,
                                            AllocationId id, int leave) {
  // Movables: the best-fitting hole below the low frontier, else the gap
  // between the frontiers at its low end. Temporaries: the highest segment
  // above the low frontier. Either way a block's place relative to its end
  // of the pool does not depend on the pool's size, so a pool of the
  // footprint places every block as a larger one did.
  StatusOr<Allocation> block = OutOfMemory("no room");
  if (arena == Arena::kLow) {
    block = pool_.Allocate(bytes, category, Placement::kLow, {0, LowFrontier()});
    if (!block.ok()) {
      block = pool_.Allocate(bytes, category, Placement::kLow, {LowFrontier(), HighFrontier()});
    }
  } else {
    block = pool_.Allocate(bytes, category, Placement::kTopDown, {LowFrontier(), main_size_});
  }
  if (!block.ok() && soft_) {  // anywhere in the main space
    block = pool_.Allocate(bytes, category,
                           arena == Arena::kLow ? Placement::kLow : Placement::kTopDown);
    if (block.ok()) ++crossings_;
  }
  if (!block.ok()) return block.status();
  blocks_[id] = {arena, block->id, block->offset, block->bytes};
  (arena == Arena::kLow ? low_ : high_).insert({block->offset, block->bytes});
  if (arena == Arena::kHigh) high_leave_[block->offset] = leave;
  NoteFrontiers();
  return block->offset;
}

void GtbmAllocator::Unplace(AllocationId id, size_t, size_t) {
  auto it = blocks_.find(id);
  const Block block = it->second;
  blocks_.erase(it);
  if (block.arena != Arena::kIncremental) {
    pool_.Free(block.pool_id);
    (block.arena == Arena::kLow ? low_ : high_).erase({block.offset, block.bytes});
    if (block.arena == Arena::kHigh) high_leave_.erase(block.offset);
    NoteFrontiers();
    return;
  }
  incremental_.Free(block.pool_id);
}

double GtbmAllocator::UnusableFree(size_t bytes) const {
  const size_t free = stats().free_bytes;
  if (free == 0) return 0.0;
  const size_t need = RoundToBlocks(std::max<size_t>(bytes, 1));
  // Segments too small in either space.
  const size_t unusable = pool_.UnusableBytes(need) + incremental_.UnusableBytes(need);
  return static_cast<double>(unusable) / free;
}

size_t GtbmAllocator::FreeSegments() const {
  return pool_.stats().free_segments + incremental_.stats().free_segments;
}

std::string GtbmAllocator::CheckPlacement() const {
  const std::string pool = pool_.CheckInvariants();
  if (!pool.empty()) return "main space: " + pool;
  const std::string incremental = incremental_.CheckInvariants();
  if (!incremental.empty()) return "incremental space: " + incremental;
  if (!soft_ && LowFrontier() > HighFrontier()) {
    return "arenas interleave: a movable block ends at " + std::to_string(LowFrontier()) +
           ", above the lowest temporary at " + std::to_string(HighFrontier());
  }
  size_t main_blocks = 0;
  for (const auto& [id, block] : blocks_) {
    if (block.arena == Arena::kIncremental) {
      if (block.offset + block.bytes > incremental_size_) {
        return "a block ends beyond the incremental space";
      }
      continue;
    }
    ++main_blocks;
    if (block.offset + block.bytes > main_size_) return "a main block ends beyond the main space";
    const auto& set = block.arena == Arena::kLow ? low_ : high_;
    if (!set.count({block.offset, block.bytes})) return "an end's index misses a block";
  }
  if (main_blocks != low_.size() + high_.size()) return "the ends' indexes have extra blocks";
  if (high_leave_.size() != high_.size()) return "the high end's leave steps are stale";
  return "";
}

size_t IncrementalSpacePeak(const AllocationProfile& profile, const NetworkView& view,
                            const MobilityClasses& classes) {
  // Allocations and frees on the profile's clock: +1 + index, -1 - index.
  std::multimap<int64_t, int64_t> events;
  for (size_t i = 0; i < profile.requests.size(); ++i) {
    const ProfiledRequest& r = profile.requests[i];
    if (!Reclaimed(r.tensor, r.step, *view.schedule, classes)) continue;
    events.insert({r.alloc_time, static_cast<int64_t>(i) + 1});
    events.insert({r.free_time, -static_cast<int64_t>(i) - 1});
  }
  HeapPool space(kReplayCapacity, FitPolicy::kBestFit);
  std::vector<AllocationId> ids(profile.requests.size(), -1);
  for (const auto& [time, event] : events) {
    if (event < 0) {
      const AllocationId id = ids[static_cast<size_t>(-event - 1)];
      if (id >= 0) space.Free(id);
      continue;
    }
    const size_t i = static_cast<size_t>(event - 1);
    StatusOr<Allocation> block =
        space.Allocate(profile.requests[i].bytes, MemoryCategory::kActivations);
    if (block.ok()) ids[i] = block->id;
  }
  return space.stats().high_water;
}

size_t GtbmReplayFootprint(const AllocationProfile& profile, const NetworkView& view,
                           const MobilityClasses& classes, size_t incremental_bytes,
                           GtbmStacking stacking) {
  GtbmAllocator gtbm(kReplayCapacity, incremental_bytes, view, classes, /*soft=*/false, stacking);
  if (!gtbm.BeginIteration(profile.phase).ok()) return SIZE_MAX;
  // Allocations and frees on the profile's clock: +1 + index, -1 - index.
  std::multimap<int64_t, int64_t> events;
  for (size_t i = 0; i < profile.requests.size(); ++i) {
    events.insert({profile.requests[i].alloc_time, static_cast<int64_t>(i) + 1});
    events.insert({profile.requests[i].free_time, -static_cast<int64_t>(i) - 1});
  }
  std::vector<AllocationId> ids(profile.requests.size(), -1);
  for (const auto& [time, event] : events) {
    if (event < 0) {
      const AllocationId id = ids[static_cast<size_t>(-event - 1)];
      if (id >= 0) gtbm.Free(id);
      continue;
    }
    const ProfiledRequest& r = profile.requests[static_cast<size_t>(event - 1)];
    AllocRequest request;
    request.bytes = r.bytes;
    request.tensor = r.tensor;
    request.step = r.step;
    StatusOr<Allocation> block = gtbm.Allocate(request);
    if (!block.ok()) return SIZE_MAX;
    ids[static_cast<size_t>(event - 1)] = block->id;
  }
  return gtbm.PeakFootprint();
}

namespace {

// The stacking rule that packs the profiled iteration tightest.
GtbmStacking ChooseStacking(const AllocationProfile& profile, const NetworkView& view,
                            const MobilityClasses& classes) {
  const size_t incremental_bytes = IncrementalSpacePeak(profile, view, classes);
  GtbmStacking best = GtbmStacking::kNone;
  size_t best_footprint = SIZE_MAX;
  for (GtbmStacking stacking : kStackingRules) {
    const size_t footprint =
        GtbmReplayFootprint(profile, view, classes, incremental_bytes, stacking);
    if (footprint < best_footprint) {
      best = stacking;
      best_footprint = footprint;
    }
  }
  return best;
}

AllocatorFactory Factory(bool soft) {
  return [soft](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
    if (c.view == nullptr) {
      return InvalidArgument("the gtbm allocator places tensors by mobility: it needs the network");
    }
    MobilityClasses classes = ClassifyMobility(*c.view, c.settings.Bytes(MinOffloadSetting()));
    size_t incremental = 0;
    GtbmStacking stacking = GtbmStacking::kNone;
    if (c.profiler) {
      // Being created, the runtime has no plans yet: the profile plans its own.
      SPILL_ASSIGN_OR_RETURN(AllocationProfile profile,
                             c.profiler(Phase::kTrain, c.capacity, ProfilePlans::kForBudget));
      incremental = IncrementalSpacePeak(profile, *c.view, classes);
      // Like Dymem's pool sizing, from an iteration in an oversized pool: in
      // a tight one the profile's prefetches follow another allocator's room.
      StatusOr<AllocationProfile> roomy = OutOfMemory("");
      if (c.capacity < kReplayCapacity) {
        roomy = c.profiler(Phase::kTrain, kReplayCapacity, ProfilePlans::kForBudget);
      }
      stacking = ChooseStacking(roomy.ok() ? *roomy : profile, *c.view, classes);
    }
    return std::unique_ptr<DeviceAllocator>(
        new GtbmAllocator(c.capacity, incremental, *c.view, std::move(classes), soft, stacking));
  };
}

AllocatorInfo GtbmInfo() {
  AllocatorInfo info{"gtbm",
                     "Dymem's arenas by tensor mobility: movable low, temporary high (top-down), "
                     "reclaimed on a stack; no compaction",
                     false,
                     Factory(false),
                     {MinOffloadSetting()}};
  info.sizes_pool = true;
  info.fragmentation_reference = true;
  return info;
}

const bool kGtbm = RegisterAllocator(GtbmInfo());

const bool kGtbmSoft =
    RegisterAllocator({"gtbm_soft",
                       "gtbm, but a request that finds no room in its arena takes the other's",
                       false,
                       Factory(true),
                       {MinOffloadSetting()}});

}  // namespace
}  // namespace spill
