// first_fit and best_fit: the SuperNeurons heap pool (memory/heap_pool.h)
// behind the allocator seam. First fit takes the lowest-addressed free
// segment that holds a request, best fit the smallest (ties: lowest
// address). Both coalesce on free and can compact: live blocks slide down
// into the holes below them.
#include <unordered_map>

#include "memory/allocators/allocator.h"

namespace spill {
namespace {

class HeapAllocator : public DeviceAllocator {
 public:
  HeapAllocator(size_t capacity, FitPolicy fit) : DeviceAllocator(capacity), pool_(capacity, fit) {}

  const char* name() const override { return FitPolicyName(pool_.fit()); }
  double UnusableFree(size_t bytes) const override { return pool_.UnusableFree(bytes); }
  bool can_compact() const override { return true; }
  size_t Extent() const override { return pool_.LiveEnd(); }

 protected:
  StatusOr<size_t> Place(const AllocRequest& request, size_t bytes, AllocationId id) override {
    SPILL_ASSIGN_OR_RETURN(Allocation a, pool_.Allocate(bytes, request.category));
    pool_id_[id] = a.id;
    return a.offset;
  }
  void Unplace(AllocationId id, size_t, size_t) override {
    auto it = pool_id_.find(id);
    pool_.Free(it->second);
    pool_id_.erase(it);
  }
  size_t Slide(AllocationId id, size_t, size_t) override { return pool_.MoveDown(pool_id_.at(id)); }
  bool Fits(size_t bytes) const override { return pool_.CanAllocate(bytes); }
  size_t Largest() const override { return pool_.stats().largest_free; }
  size_t FreeSegments() const override { return pool_.stats().free_segments; }
  std::string CheckPlacement() const override { return pool_.CheckInvariants(); }

 private:
  HeapPool pool_;
  std::unordered_map<AllocationId, AllocationId> pool_id_;  // seam id -> pool id
};

// First fit and best fit are the placements every allocator is compared
// with in Dymem's fragmentation figure.
AllocatorInfo HeapInfo(const char* name, const char* summary, FitPolicy fit) {
  AllocatorInfo info{
      name, summary, false,
      [fit](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
        return std::unique_ptr<DeviceAllocator>(new HeapAllocator(c.capacity, fit));
      }};
  info.fragmentation_reference = true;
  return info;
}

const bool kFirstFit = RegisterAllocator(
    HeapInfo("first_fit", "lowest-addressed free segment that fits (coalescing, compaction)",
             FitPolicy::kFirstFit));
const bool kBestFit = RegisterAllocator(HeapInfo(
    "best_fit", "smallest free segment that fits (coalescing, compaction)", FitPolicy::kBestFit));

}  // namespace
}  // namespace spill
