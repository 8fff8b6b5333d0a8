#include "memory/backing.h"

#include "framework/base/units.h"

namespace spill {
namespace {

// Byte value whose float pattern is a quiet NaN (0xFFFFFFFF).
constexpr int kPoisonByte = 0xFF;
constexpr char kFileTierPrefix[] = "file:";

class DeviceBacking : public Backing {
 public:
  explicit DeviceBacking(Device& device) : device_(device) {}
  ~DeviceBacking() override {
    device_.copy_queue().Synchronize();
    if (device_base_ != nullptr) allocator_->Release(device_, device_base_);
    if (host_base_ != nullptr) device_.ReleaseHostRegion(host_base_);
  }

  bool computes() const override { return true; }

  Status Reserve(DeviceAllocator& allocator, size_t host_bytes,
                 const std::string& host_tier) override {
    SPILL_ASSIGN_OR_RETURN(void* base, allocator.Reserve(device_));
    device_base_ = static_cast<char*>(base);
    allocator_ = &allocator;
    if (host_bytes == 0) return Status::Ok();
    StatusOr<void*> host = host_tier == "ram"
                               ? device_.ReserveHostRegion(host_bytes)
                               : device_.ReserveFileHostRegion(
                                     host_bytes, host_tier.substr(sizeof(kFileTierPrefix) - 1));
    if (!host.ok()) {  // name the setting, not only the region it failed on
      return Status(host.status().code(),
                    "memory.host_budget " + FormatBytes(static_cast<double>(host_bytes)) + ": " +
                        host.status().message() + " (lower memory.host_budget or --host-memory)");
    }
    host_base_ = static_cast<char*>(*host);
    return Status::Ok();
  }

  char* device_address(size_t offset) const override { return device_base_ + offset; }
  char* host_address(size_t offset) const override { return host_base_ + offset; }

  void AnnotateAllocation(size_t offset, size_t bytes) override {
    device_.AnnotateAllocation(device_base_ + offset, bytes);
  }
  void AnnotateFree(size_t offset) override { device_.AnnotateFree(device_base_ + offset); }
  void Poison(size_t offset, size_t bytes) override {
    device_.MemsetAsync(device_base_ + offset, kPoisonByte, bytes, device_.compute_queue());
  }
  Status PinHost(size_t bytes) override { return device_.EnsureHostPinned(host_base_, bytes); }

  std::shared_ptr<Event> CopyOut(size_t host_offset, size_t device_offset, size_t bytes) override {
    Queue& copy = device_.copy_queue();
    copy.Wait(device_.compute_queue().Record());  // after the compute that wrote it
    device_.CopyAsync(host_base_ + host_offset, device_base_ + device_offset, bytes,
                      CopyKind::kDeviceToHost, copy);
    return copy.Record();
  }

  std::shared_ptr<Event> CopyIn(size_t device_offset, size_t host_offset, size_t bytes) override {
    Queue& copy = device_.copy_queue();
    // The block may have been freed by compute enqueued before now.
    copy.Wait(device_.compute_queue().Record());
    device_.CopyAsync(device_base_ + device_offset, host_base_ + host_offset, bytes,
                      CopyKind::kHostToDevice, copy);
    return copy.Record();
  }

  std::shared_ptr<Event> CopySliceIn(void* staging, size_t host_offset, size_t bytes) override {
    Queue& copy = device_.copy_queue();
    copy.Wait(device_.compute_queue().Record());  // the last slice in `staging` is done with it
    device_.CopyAsync(staging, host_base_ + host_offset, bytes, CopyKind::kHostToDevice, copy);
    return copy.Record();
  }

  std::shared_ptr<Event> CopySliceOut(size_t host_offset, const void* staging,
                                      size_t bytes) override {
    Queue& copy = device_.copy_queue();
    copy.Wait(device_.compute_queue().Record());  // after the compute that wrote the slice
    device_.CopyAsync(host_base_ + host_offset, staging, bytes, CopyKind::kDeviceToHost, copy);
    return copy.Record();
  }

  // Downward and possibly overlapping: the device copies as memmove does. A
  // memory checker sees the move's whole span as one block while the copy
  // runs (it reads the old place and writes the new one), then the tensor's
  // block at its new place.
  void MoveDown(size_t target, size_t offset, size_t bytes) override {
    device_.AnnotateFree(device_base_ + offset);
    device_.AnnotateAllocation(device_base_ + target, offset + bytes - target);
    device_.CopyAsync(device_base_ + target, device_base_ + offset, bytes,
                      CopyKind::kDeviceToDevice, device_.compute_queue());
    device_.AnnotateFree(device_base_ + target);
    device_.AnnotateAllocation(device_base_ + target, bytes);
  }

  void ComputeWaits(const std::shared_ptr<Event>& event) override {
    if (event) device_.compute_queue().Wait(event);
  }
  void SynchronizeCopies() override { device_.copy_queue().Synchronize(); }

  Status HoldsData() const override { return Status::Ok(); }
  void CopySync(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    device_.CopySync(dst, src, bytes, kind);
  }

  Status RequireUpdate(const SlotUpdate& update, const std::string& param) const override {
    if (update) return Status::Ok();
    return InvalidArgument(
        "the solver step of '" + param +
        "' is due during backward (its parameters live in host memory): hand the store the "
        "update (Solver::BeginStep) before running the iteration");
  }

  void Update(const SlotUpdate& update, const ParameterSlot& slot, float* w, float* g,
              const std::vector<float*>& state) override {
    if (update) update(slot, w, g, state, /*host=*/false);
  }

  void UpdateInHostMemory(const SlotUpdate& update, const ParameterSlot& slot, float* w, float* g,
                          const std::vector<float*>& state) override {
    const ParameterSlot copy = slot;
    device_.EnqueueHostTask(device_.copy_queue(), [update, copy, w, g, state] {
      update(copy, w, g, state, /*host=*/true);
    });
  }

 private:
  Device& device_;
  DeviceAllocator* allocator_ = nullptr;  // that reserved the device region
  char* device_base_ = nullptr;
  char* host_base_ = nullptr;
};

class PlanningBacking : public Backing {
 public:
  bool computes() const override { return false; }
  Status Reserve(DeviceAllocator&, size_t, const std::string&) override { return Status::Ok(); }
  char* device_address(size_t) const override { return nullptr; }
  char* host_address(size_t) const override { return nullptr; }
  void AnnotateAllocation(size_t, size_t) override {}
  void AnnotateFree(size_t) override {}
  void Poison(size_t, size_t) override {}
  Status PinHost(size_t) override { return Status::Ok(); }
  std::shared_ptr<Event> CopyOut(size_t, size_t, size_t) override { return nullptr; }
  std::shared_ptr<Event> CopyIn(size_t, size_t, size_t) override { return nullptr; }
  std::shared_ptr<Event> CopySliceIn(void*, size_t, size_t) override { return nullptr; }
  std::shared_ptr<Event> CopySliceOut(size_t, const void*, size_t) override { return nullptr; }
  void MoveDown(size_t, size_t, size_t) override {}
  void ComputeWaits(const std::shared_ptr<Event>&) override {}
  void SynchronizeCopies() override {}
  Status HoldsData() const override { return Internal("no tensor holds data while planning"); }
  void CopySync(void*, const void*, size_t, CopyKind) override {}
  Status RequireUpdate(const SlotUpdate&, const std::string&) const override {
    return Status::Ok();
  }
  void Update(const SlotUpdate&, const ParameterSlot&, float*, float*,
              const std::vector<float*>&) override {}
  void UpdateInHostMemory(const SlotUpdate&, const ParameterSlot&, float*, float*,
                          const std::vector<float*>&) override {}
};

}  // namespace

std::unique_ptr<Backing> MakeDeviceBacking(Device& device) {
  return std::make_unique<DeviceBacking>(device);
}

std::unique_ptr<Backing> MakePlanningBacking() { return std::make_unique<PlanningBacking>(); }

}  // namespace spill
