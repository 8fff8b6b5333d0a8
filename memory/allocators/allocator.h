// The allocator seam: how device memory requests become places in the
// device region.
//
// The residency state machine (memory/residency.h) and the runtime ask an
// allocator for every byte of device memory - tensors and workspaces - and
// never look inside it. Implementations are policies chosen by name at run
// time (`memory.allocator`, `--allocator`), each in its own file with one
// registration line:
//
//   first_fit, best_fit  HeapPool's free lists (heap_allocators.cc)
//   caching              CNMeM's and PyTorch's caching best fit: segments
//                        grown per request, never merged
//                        (caching_allocator.cc)
//   static               offsets precomputed from a profiled iteration by
//                        dynamic storage allocation (static_allocator.cc)
//   gtbm                 Dymem's arenas by tensor mobility: movable low,
//                        temporary high, reclaimed on a stack
//                        (gtbm_allocator.h)
//   ideal                plan-only accounting: a request fits while live bytes
//                        stay within the budget; offsets are not a placement
//
// The base class keeps what every allocator must report the same way: bytes
// in use and peaks by category, footprint (the highest end offset ever
// placed), failures, and - when an event log is attached - one alloc/free
// event per request, with the U_f (unusable free fraction) the request met
// and the extent of the placements after it.
// An implementation only places and frees.
//
// Invariants, for every implementation
//   * a block lies inside [0, capacity) and never overlaps another live block
//     (except `ideal`, which places nothing and cannot back a device);
//   * a request that cannot be served returns kOutOfMemory and changes
//     nothing, so callers can evict and retry;
//   * decisions depend only on the sequence of requests, never on timing, so
//     the planner (no device) and a run make the same placements.
#ifndef SPILL_MEMORY_ALLOCATORS_ALLOCATOR_H_
#define SPILL_MEMORY_ALLOCATORS_ALLOCATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/base/registry.h"
#include "framework/base/status.h"
#include "framework/device/device.h"
#include "framework/schedule/declarations.h"
#include "framework/schedule/network_view.h"
#include "framework/schedule/schedule.h"
#include "memory/heap_pool.h"
#include "memory/memory_events.h"
#include "memory/settings.h"

namespace spill {

struct AllocRequest {
  size_t bytes = 0;
  MemoryCategory category = MemoryCategory::kActivations;
  TensorId tensor = kNoTensor;  // kNoTensor: a step's workspace
  int step = -1;                // the step being prepared; -1 outside an iteration
  // Placement hint for policies that use one (0: none).
  int hint = 0;
};

// One iteration's requests in order, with their lifetimes: the input of
// profile-guided allocators (memory/memory_events.h makes them from a log).
struct ProfiledRequest {
  TensorId tensor = kNoTensor;
  int occurrence = 0;  // k-th request of this tensor (or of this step's workspace)
  int step = -1;
  size_t bytes = 0;  // rounded to pool blocks
  int64_t alloc_time = 0;
  int64_t free_time = 0;  // the last event time when never freed in the iteration
};

struct AllocationProfile {
  Phase phase = Phase::kTrain;
  size_t budget = 0;  // the budget its decisions were made under
  std::vector<ProfiledRequest> requests;
};

// The requests of one iteration's alloc/free events, in order, with
// lifetimes on the event clock (a block still live at the end lives to the
// end). Allocations outside the steps (step < 0: tensors kept for good) and
// frees of blocks allocated before the iteration are not requests.
AllocationProfile ProfileFromEvents(const std::vector<MemoryEvent>& events, Phase phase,
                                    size_t budget);

// Which transfer plans a profiled iteration runs.
enum class ProfilePlans {
  // The runtime's own: those of the iterations the allocator will serve,
  // whatever the profile's budget. Below the device budget the profile then
  // shows those iterations evicting more to stay within it - as they will
  // when the allocator serves them at that budget - and not the plans a run
  // with that budget would make (a planner that searches plans for the
  // budget it is given).
  kRuntime,
  // Made for the profile's budget, as a run with that budget would make
  // them: the only ones there are while the allocator is being created.
  kForBudget,
};

// Runs one iteration of `phase` under an accounting-only allocator with
// `budget` bytes and returns its requests (set by the runtime, which owns
// the planner; profile-guided allocators call it).
using Profiler =
    std::function<StatusOr<AllocationProfile>(Phase phase, size_t budget, ProfilePlans plans)>;

struct AllocatorContext {
  size_t capacity = 0;
  Profiler profiler;  // may be empty (then profile-guided allocators fail)
  // The network, for allocators that place by what a tensor is (may be null).
  const NetworkView* view = nullptr;
  // The values given for policy settings; an allocator reads its own
  // (AllocatorInfo::settings).
  PolicySettings settings;
};

class DeviceAllocator {
 public:
  explicit DeviceAllocator(size_t capacity);
  virtual ~DeviceAllocator() = default;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  virtual const char* name() const = 0;
  // False for accounting-only allocators, which must not back a device.
  virtual bool places() const { return true; }

  // The device region blocks are placed in: offsets are relative to the
  // base it returns. By default one region of capacity() bytes; allocators
  // that map memory themselves (virtual addressing) reserve address space.
  virtual StatusOr<void*> Reserve(Device& device);
  virtual void Release(Device& device, void* base);
  // The most device memory the placements have needed at once: by default
  // the highest end offset ever placed; allocators that map memory report
  // their mapped peak.
  virtual size_t PeakFootprint() const { return stats_.high_water; }
  // The addresses blocks may be placed at: [0, address_space()). The
  // region by default; allocators that map memory reserve more addresses
  // than memory.
  virtual size_t address_space() const { return capacity_; }
  // The device memory the live placements span now - what a pool would
  // need if they were the peak: by default the end of the highest live
  // block; allocators with several arenas add up their extents.
  virtual size_t Extent() const;
  // The order in which the tensors `step` writes are placed: by default as
  // the step lists them (GTBM places same-step temporaries longest-lived
  // first).
  virtual std::vector<TensorId> PlacementOrder(const Step& step) const { return step.writes; }

  // Rounds up to pool blocks and places the request, or kOutOfMemory.
  StatusOr<Allocation> Allocate(const AllocRequest& request);
  void Free(AllocationId id);
  // Whether a request of `bytes` would succeed now.
  bool CanAllocate(size_t bytes) const { return Fits(RoundToBlocks(std::max<size_t>(bytes, 1))); }
  // The largest request that would succeed now.
  size_t LargestFree() const { return Largest(); }
  // Dymem's U_f for a request of `bytes`: the fraction of free memory that
  // cannot serve it (0: none).
  virtual double UnusableFree(size_t bytes) const = 0;

  // An iteration of `phase` starts / ends (profile-guided allocators key
  // their requests by position within it).
  virtual Status BeginIteration(Phase phase) { return Status::Ok(); }
  virtual void EndIteration() {}
  // Physical chunks mapped and unmapped so far (allocators that map memory;
  // 0 for the others).
  struct MappingCounts {
    int64_t maps = 0, unmaps = 0;
    // TakeMappingWork only: of the blocks whose frees gave back the chunks
    // unmapped, the one freed last (-1: none, or freed before the allocator
    // last began counting). An unmap waits for the compute queued before
    // that free.
    AllocationId fence = -1;
  };
  virtual MappingCounts mapping_counts() const { return {}; }
  // The mapping done since the last call: an allocation event carries what
  // its request did (and whatever a failed one did before it); the runtime
  // logs what EndIteration did.
  MappingCounts TakeMappingWork();

  // Compaction: sliding live blocks down to close holes. Allocators that
  // cannot move blocks say so; the runtime then never compacts.
  virtual bool can_compact() const { return false; }
  // Moves `id` into the lowest free place that holds it and returns its new
  // offset (the caller moves the bytes).
  size_t MoveDown(AllocationId id);
  // Live blocks by increasing offset.
  std::vector<std::pair<size_t, AllocationId>> AllocationsByOffset() const;

  size_t capacity() const { return capacity_; }
  const PoolStats& stats() const { return stats_; }
  // Forgets the peaks, not the live blocks: a new measurement window.
  void ResetPeaks();
  // Requests that had to be served differently from their profile (static).
  int64_t mismatches() const { return mismatches_; }

  // Overdraft, for replaying a plan that may not fit (planning only): while
  // on, a request the allocator cannot place is placed past the region
  // instead - first fit above its end, in a space of its own that the
  // allocator's policy never sees - and counts as in use like any other
  // block. Off (the default): such a request is kOutOfMemory.
  void set_overdraft(bool on) { overdraft_ = on; }
  // How far past the budget the live placements reach now, and the most
  // since ResetPeaks: the end of the highest block placed past the region;
  // for allocators that place nothing (`ideal`), the live bytes beyond the
  // budget. 0 while everything fits.
  size_t overshoot() const;
  size_t overshoot_peak() const { return overshoot_peak_; }

  // Appends alloc/free events to `log` (null: none).
  void set_event_log(MemoryEventLog* log) { log_ = log; }
  // Adds a kResident event per live block to the event log, by offset: where
  // the next iteration starts from (the runtime calls it as one begins).
  void RecordResident();
  // Checks every invariant after every allocation and free, and stops the
  // program at the first that fails (a debugging aid for tests).
  void set_check_every_event(bool check) { check_every_event_ = check; }
  // The checks of the base and of the implementation; "" when all hold.
  std::string CheckInvariants() const;

 protected:
  // Places `bytes` (rounded) and returns the block's offset; kOutOfMemory
  // changes nothing. `id` is the block's handle in later calls.
  virtual StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) = 0;
  virtual void Unplace(AllocationId id, size_t offset, size_t bytes) = 0;
  virtual bool Fits(size_t bytes) const = 0;
  virtual size_t Largest() const = 0;
  virtual size_t FreeSegments() const = 0;
  virtual std::string CheckPlacement() const { return ""; }
  // MappingCounts::fence of the unmaps since the last call, forgotten.
  virtual AllocationId TakeUnmapFence() { return -1; }
  // Compaction (only where can_compact()): the block's new offset.
  virtual size_t Slide(AllocationId id, size_t offset, size_t bytes);
  void CountMismatch() { ++mismatches_; }
  struct LiveBlock {
    AllocationId id;
    size_t offset;
    size_t bytes;
    MemoryCategory category;
  };
  // Every live block, by increasing offset.
  std::vector<LiveBlock> LiveBlocks() const;

 private:
  MappingCounts mapping_taken_;
  struct Live {
    size_t offset;
    size_t bytes;
    MemoryCategory category;
    TensorId tensor;
  };
  void UpdateFreeStats();
  void CheckEvent(const char* what) const;
  // Places `bytes` past the region; returns the offset.
  size_t Overdraw(size_t bytes, MemoryCategory category, AllocationId id);

  size_t capacity_;
  PoolStats stats_;
  std::unordered_map<AllocationId, Live> live_;
  AllocationId next_id_ = 0;
  int64_t mismatches_ = 0;
  MemoryEventLog* log_ = nullptr;
  bool check_every_event_ = false;
  bool overdraft_ = false;
  // Blocks placed past the region: their allocations in `overdraft_pool_`.
  std::unique_ptr<HeapPool> overdraft_pool_;
  std::unordered_map<AllocationId, AllocationId> overdrawn_;
  size_t overdrawn_bytes_ = 0;
  size_t overshoot_peak_ = 0;
};

// ---- Registry: allocators register themselves next to their code. ----

using AllocatorFactory =
    std::function<StatusOr<std::unique_ptr<DeviceAllocator>>(const AllocatorContext& context)>;

// The device bytes a request of `bytes` takes under an allocator, for
// policies that plan ahead in bytes (the window scheduler), under the
// allocator's settings; `persistent` for parameters, their gradients and
// solver state.
using AllocatorCharge =
    std::function<size_t(size_t bytes, const PolicySettings& settings, bool persistent)>;

struct AllocatorInfo {
  std::string name;
  std::string summary;  // one line, for --help and errors
  bool plan_only = false;
  AllocatorFactory create;
  // Its keys of the memory: section (memory/settings.h).
  std::vector<SettingSpec> settings;
  AllocatorCharge charge;  // empty: whole pool blocks
  // Of a device budget, what charged requests can fill (empty: all of it).
  std::function<size_t(size_t budget, const PolicySettings& settings)> usable;
  // Its pool is sized from a profiled plan (Dymem's init + beta:
  // memory/planning/pool_sizing.h, `plan --size-pool`).
  bool sizes_pool = false;
  // One of the placements `plan --fragmentation-svg` compares any allocator
  // with (Dymem's figure: first fit, best fit, GTBM).
  bool fragmentation_reference = false;
};

// Every allocator, by name.
Registry<AllocatorInfo>& Allocators();
bool RegisterAllocator(AllocatorInfo info);
// "unknown allocator 'x'; known: best_fit, first_fit, ..." for names not registered.
StatusOr<std::unique_ptr<DeviceAllocator>> CreateAllocator(const std::string& name,
                                                           const AllocatorContext& context);
const AllocatorInfo* FindAllocator(const std::string& name);
// What `bytes` take under the allocator `name` (pool blocks when it does
// not say, or is unknown).
size_t ChargedBytes(const std::string& name, size_t bytes, const PolicySettings& settings,
                    bool persistent);
// What charged requests can fill of `budget` under the allocator `name`.
size_t UsableBytes(const std::string& name, size_t budget, const PolicySettings& settings);
std::vector<std::string> AllocatorNames();

}  // namespace spill

#endif  // SPILL_MEMORY_ALLOCATORS_ALLOCATOR_H_
