// ideal: accounting without placement. A request fits while the bytes live
// stay within the budget, as if every free byte were one contiguous hole, so
// its footprint equals the max load - the lower bound of any real placement.
// Plan-only: blocks are stacked at their running total, which overlaps live
// blocks after a free, so it cannot back a device. Profile-guided allocators
// use it to fix an iteration's decisions (evictions, algorithms) before
// choosing offsets.
#include "memory/allocators/allocator.h"

namespace spill {
namespace {

class IdealAllocator : public DeviceAllocator {
 public:
  explicit IdealAllocator(size_t capacity) : DeviceAllocator(capacity) {}

  const char* name() const override { return "ideal"; }
  bool places() const override { return false; }
  double UnusableFree(size_t) const override { return 0.0; }

 protected:
  StatusOr<size_t> Place(const AllocRequest&, size_t bytes, AllocationId) override {
    if (!Fits(bytes)) return OutOfMemory("over budget");
    return stats().total_in_use;
  }
  void Unplace(AllocationId, size_t, size_t) override {}
  bool Fits(size_t bytes) const override { return stats().total_in_use + bytes <= capacity(); }
  size_t Largest() const override {
    return stats().total_in_use < capacity() ? capacity() - stats().total_in_use : 0;
  }
  size_t FreeSegments() const override { return Largest() > 0 ? 1 : 0; }
};

const bool kIdeal = RegisterAllocator(
    {"ideal", "plan only: fits while live bytes stay within the budget (footprint = max load)",
     true, [](const AllocatorContext& c) -> StatusOr<std::unique_ptr<DeviceAllocator>> {
       return std::unique_ptr<DeviceAllocator>(new IdealAllocator(c.capacity));
     }});

}  // namespace
}  // namespace spill
