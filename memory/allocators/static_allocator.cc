// static: profile-guided static allocation (Sekiyama et al., arXiv
// 1804.10001). An iteration's requests repeat from one iteration to the
// next, so their places can be computed once, offline, and every request
// then served from its precomputed offset without any search.
//
// Policy
//   * Profile. At the first iteration of each phase the allocator asks the
//     runtime's profiler for that iteration's requests under the
//     accounting-only `ideal` allocator at a decision budget B' (first the
//     device budget): the evictions and algorithm choices of the iteration
//     are thereby fixed. At every B' the profile runs the runtime's own
//     transfer plans, made for the device budget: the iterations served
//     follow those plans, while a planner that searches would plan anew for
//     B' and the first request of its other plan would be a mismatch.
//   * Solve. The requests and their lifetimes become a dynamic storage
//     allocation instance, solved by the paper's best-fit skyline heuristic
//     (dsa_solver.h) and checked. Offsets start at the base: the end of the
//     blocks live when the iteration starts (the persistent tensors). If
//     base + footprint exceeds the budget, B' is lowered by the excess and
//     the profile made again (the iteration then evicts more), a few rounds
//     at most; then the allocator reports out of memory.
//   * Serve. Every allocation and free of the iteration must come at its
//     profiled position on the event clock, and the k-th request must be the
//     k-th profiled one (same tensor, or the same step's workspace, and no
//     larger): it gets its offset in O(1), with no search and no free list.
//     Fitting is decided as the profile decided it - while the bytes live
//     stay within B' - so the runtime makes the profiled decisions again.
//   * Re-plan. The first event unlike the profile (another algorithm, another
//     order) counts as a mismatch; the free space is rebuilt from the live
//     blocks and the rest of the iteration is served by best fit. The
//     iteration's own requests then become the phase's new profile, solved
//     again for its next iteration (the paper's re-optimisation).
//   * Outside an iteration (parameters, solver state, tensors kept for good)
//     requests are served by best fit.
//
// Invariant: blocks never overlap. While the event sequence equals the
// profile, the placement is the checked DSA solution above blocks that were
// live before the iteration; any deviation is caught at the first event that
// differs, before a block is placed by it. No compaction: offsets are the plan.
#include <unordered_map>

#include "framework/base/units.h"
#include "memory/allocators/allocator.h"
#include "memory/allocators/dsa_solver.h"

namespace spill {
namespace {

// Rounds of profiling at a lowered decision budget before giving up.
constexpr int kMaxProfileRounds = 4;

struct Solved {
  AllocationProfile profile;
  std::vector<size_t> offsets;  // from the base, one per request
  size_t footprint = 0;         // of the requests alone
  size_t base = 0;
};

class StaticAllocator : public DeviceAllocator {
 public:
  explicit StaticAllocator(const AllocatorContext& context)
      : DeviceAllocator(context.capacity),
        profiler_(context.profiler),
        free_space_(context.capacity, FitPolicy::kBestFit),
        decision_budget_(capacity()) {}

  const char* name() const override { return "static"; }
  // Served as planned, a request meets no unusable space.
  double UnusableFree(size_t bytes) const override {
    return serving_statically() ? 0.0 : FreeSpace().pool.UnusableFree(bytes);
  }

  Status BeginIteration(Phase phase) override {
    phase_ = phase;
    in_iteration_ = true;
    cursor_ = 0;
    clock_ = 0;
    diverged_ = false;
    observed_.clear();
    observed_index_.clear();
    std::unique_ptr<Solved>& solved = phase == Phase::kTrain ? train_ : eval_;
    if (solved == nullptr) SPILL_RETURN_IF_ERROR(Prepare(phase, &solved));
    current_ = solved.get();
    decision_budget_ = current_->profile.budget;
    // The blocks live now must lie below the plan's base.
    if (LiveEnd() > current_->base) Diverge();
    return Status::Ok();
  }

  void EndIteration() override {
    in_iteration_ = false;
    // Planned blocks that outlive the iteration join the free-space map.
    if (!planned_.empty()) free_space_stale_ = true;
    if (diverged_) Reoptimize();
    current_ = nullptr;
    decision_budget_ = capacity();
  }

 protected:
  StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) override {
    if (stats().total_in_use + bytes > decision_budget_) return OutOfMemory("over budget");
    if (serving_statically()) {
      if (cursor_ < current_->profile.requests.size() && Matches(request, bytes)) {
        const size_t offset = current_->base + current_->offsets[cursor_];
        planned_[id] = cursor_++;
        Observe(request, bytes, id);
        ++clock_;
        return offset;
      }
      Diverge();
    }
    FreeSpaceMap& space = FreeSpace();
    SPILL_ASSIGN_OR_RETURN(Allocation a, space.pool.Allocate(bytes, request.category));
    space.handles[id] = a.id;
    Observe(request, bytes, id);
    if (in_iteration_) ++clock_;
    return a.offset;
  }

  void Unplace(AllocationId id, size_t, size_t) override {
    if (in_iteration_) {
      auto seen = observed_index_.find(id);
      if (seen != observed_index_.end()) observed_[seen->second].free_time = clock_;
    }
    auto planned = planned_.find(id);
    if (planned != planned_.end()) {
      if (serving_statically() && current_->profile.requests[planned->second].free_time != clock_) {
        planned_.erase(planned);
        Diverge();  // rebuilt without this block, which is being freed
      } else {
        planned_.erase(planned);
      }
    } else if (!free_space_stale_) {
      auto it = free_space_.handles.find(id);
      free_space_.pool.Free(it->second);
      free_space_.handles.erase(it);
    }
    if (in_iteration_) ++clock_;
  }

  bool Fits(size_t bytes) const override {
    if (stats().total_in_use + bytes > decision_budget_) return false;
    return serving_statically() || FreeSpace().pool.CanAllocate(bytes);
  }
  size_t Largest() const override {
    const size_t ideal = decision_budget_ - std::min(decision_budget_, stats().total_in_use);
    if (serving_statically()) return ideal;
    return std::min(ideal, FreeSpace().pool.stats().largest_free);
  }
  size_t FreeSegments() const override {
    return serving_statically() ? 1 : FreeSpace().pool.stats().free_segments;
  }

 private:
  // Best fit over the space no live block holds, for requests not served
  // from the plan. Stale while the plan is served; rebuilt when needed.
  struct FreeSpaceMap {
    FreeSpaceMap(size_t capacity, FitPolicy fit) : pool(capacity, fit) {}
    HeapPool pool;
    std::unordered_map<AllocationId, AllocationId> handles;  // seam id -> pool id
  };

  bool serving_statically() const { return in_iteration_ && !diverged_ && current_ != nullptr; }

  bool Matches(const AllocRequest& request, size_t bytes) const {
    const ProfiledRequest& expected = current_->profile.requests[cursor_];
    return expected.alloc_time == clock_ && expected.tensor == request.tensor &&
           (request.tensor != kNoTensor || expected.step == request.step) &&
           bytes <= expected.bytes;
  }

  void Diverge() {
    if (!diverged_ && in_iteration_) CountMismatch();
    diverged_ = true;
    free_space_stale_ = true;
  }

  // The free-space map, rebuilt from the live blocks when it is stale.
  // Never used while the plan is served.
  FreeSpaceMap& FreeSpace() const {
    if (!free_space_stale_) return free_space_;
    free_space_ = FreeSpaceMap(capacity(), FitPolicy::kBestFit);
    for (const LiveBlock& b : LiveBlocks()) {
      auto a = free_space_.pool.AllocateAt(b.offset, b.bytes, b.category);
      SPILL_CHECK(a.ok()) << "static allocator: live blocks overlap at " << b.offset;
      free_space_.handles[b.id] = a->id;
    }
    planned_.clear();
    free_space_stale_ = false;
    return free_space_;
  }

  size_t LiveEnd() const {
    const auto blocks = LiveBlocks();
    size_t end = 0;
    for (const LiveBlock& b : blocks) end = std::max(end, b.offset + b.bytes);
    return end;
  }

  void Observe(const AllocRequest& request, size_t bytes, AllocationId id) {
    if (!in_iteration_) return;
    ProfiledRequest r;
    r.tensor = request.tensor;
    r.step = request.step;
    r.bytes = bytes;
    r.alloc_time = clock_;
    r.free_time = -1;
    observed_index_[id] = observed_.size();
    observed_.push_back(r);
  }

  // Profiles `phase` and solves it, lowering the decision budget while the
  // solution does not fit.
  Status Prepare(Phase phase, std::unique_ptr<Solved>* out) {
    if (!profiler_) return Internal("the static allocator needs a profiler");
    size_t budget = capacity();
    const size_t base = LiveEnd();
    for (int round = 0; round < kMaxProfileRounds; ++round) {
      SPILL_ASSIGN_OR_RETURN(AllocationProfile profile,
                             profiler_(phase, budget, ProfilePlans::kRuntime));
      std::unique_ptr<Solved> solved = Solve(std::move(profile), base);
      const size_t end = base + solved->footprint;
      if (end <= capacity()) {
        *out = std::move(solved);
        return Status::Ok();
      }
      const size_t excess = end - capacity();
      if (excess >= budget) break;
      budget -= excess;
    }
    return OutOfMemory("static allocation: no profile of the " +
                       std::string(phase == Phase::kTrain ? "training" : "evaluation") +
                       " iteration packs into the " + FormatBytes(static_cast<double>(capacity())) +
                       " budget");
  }

  // The iteration left its profile: its own requests are the new profile,
  // used from the next iteration of the phase on.
  void Reoptimize() {
    for (ProfiledRequest& r : observed_) {
      if (r.free_time < 0) r.free_time = clock_;
    }
    AllocationProfile profile;
    profile.phase = phase_;
    profile.budget = current_->profile.budget;
    profile.requests = observed_;
    std::unique_ptr<Solved> solved = Solve(std::move(profile), current_->base);
    if (solved->base + solved->footprint > capacity()) return;  // keep serving by best fit
    (phase_ == Phase::kTrain ? train_ : eval_) = std::move(solved);
  }

  static std::unique_ptr<Solved> Solve(AllocationProfile profile, size_t base) {
    std::vector<DsaBlock> blocks;
    blocks.reserve(profile.requests.size());
    for (const ProfiledRequest& r : profile.requests) {
      blocks.push_back({r.bytes, r.alloc_time, r.free_time});
    }
    DsaSolution solution = SolveDsaBestFit(blocks);
    const std::string check = CheckDsaSolution(blocks, solution);
    SPILL_CHECK(check.empty()) << "static allocator: " << check;
    auto solved = std::make_unique<Solved>();
    solved->profile = std::move(profile);
    solved->offsets = std::move(solution.offsets);
    solved->footprint = solution.footprint;
    solved->base = base;
    return solved;
  }

  Profiler profiler_;
  mutable FreeSpaceMap free_space_;
  mutable bool free_space_stale_ = false;
  size_t decision_budget_;
  Phase phase_ = Phase::kTrain;
  bool in_iteration_ = false;
  bool diverged_ = false;
  size_t cursor_ = 0;  // the paper's lambda: the next profiled request
  int64_t clock_ = 0;  // allocations and frees so far in the iteration
  std::unique_ptr<Solved> train_, eval_;
  Solved* current_ = nullptr;
  // Blocks placed from the plan (not in the free-space map): seam id -> request.
  mutable std::unordered_map<AllocationId, size_t> planned_;
  std::vector<ProfiledRequest> observed_;  // this iteration's requests
  std::unordered_map<AllocationId, size_t> observed_index_;
};

const bool kStatic = RegisterAllocator(
    {"static",
     "offsets precomputed by dynamic storage allocation over a profiled iteration (no search)",
     false, [](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
       return std::unique_ptr<DeviceAllocator>(new StaticAllocator(c));
     }});

}  // namespace
}  // namespace spill
