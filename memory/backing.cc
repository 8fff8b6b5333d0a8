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
    device_.SynchronizeCopies();
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
    return ToHost(host_base_ + host_offset, device_base_ + device_offset, bytes);
  }

  std::shared_ptr<Event> CopyIn(size_t device_offset, size_t host_offset, size_t bytes,
                                const std::shared_ptr<Event>& after) override {
    return ToDevice(device_base_ + device_offset, host_base_ + host_offset, bytes, after);
  }

  std::shared_ptr<Event> CopySliceIn(void* staging, size_t host_offset, size_t bytes,
                                     const std::shared_ptr<Event>& after) override {
    return ToDevice(staging, host_base_ + host_offset, bytes, after);
  }

  std::shared_ptr<Event> CopySliceOut(size_t host_offset, const void* staging,
                                      size_t bytes) override {
    return ToHost(host_base_ + host_offset, staging, bytes);
  }

  // Downward and possibly overlapping: the device copies as memmove does. A
  // memory checker sees the move's whole span as one block while the copy
  // runs (it reads the old place and writes the new one), then the tensor's
  // block at its new place.
  // Announced twice, as the pool sees a move: the span the copy writes
  // while it runs, then the block at its new place. A slide into the hole
  // right below overlaps the block's old place, and one span covers both; a
  // move into a hole further down (past a block that stays) writes its new
  // place alone, and the old one is given back after the copy.
  void MoveDown(size_t target, size_t offset, size_t bytes) override {
    if (target + bytes <= offset) {
      device_.AnnotateAllocation(device_base_ + target, bytes);
      device_.CopyAsync(device_base_ + target, device_base_ + offset, bytes,
                        CopyKind::kDeviceToDevice, device_.compute_queue());
      device_.AnnotateFree(device_base_ + offset);
      device_.AnnotateFree(device_base_ + target);
      device_.AnnotateAllocation(device_base_ + target, bytes);
      return;
    }
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
  void SynchronizeCopies() override { device_.SynchronizeCopies(); }

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

  std::shared_ptr<Event> UpdateInHostMemory(const SlotUpdate& update, const ParameterSlot& slot,
                                            float* w, float* g,
                                            const std::vector<float*>& state) override {
    const ParameterSlot copy = slot;
    Queue& to_host = device_.device_to_host_queue();  // behind the gradient's copy
    device_.EnqueueHostTask(
        to_host, [update, copy, w, g, state] { update(copy, w, g, state, /*host=*/true); });
    return to_host.Record();
  }

 private:
  // A device-to-host copy after the compute that wrote its source.
  std::shared_ptr<Event> ToHost(void* host, const void* device, size_t bytes) {
    Queue& queue = device_.device_to_host_queue();
    queue.Wait(device_.compute_queue().Record());
    device_.CopyAsync(host, device, bytes, CopyKind::kDeviceToHost, queue);
    return queue.Record();
  }

  // A host-to-device copy after the compute queued so far (which may have
  // freed or last read the destination) and `after`.
  std::shared_ptr<Event> ToDevice(void* device, const void* host, size_t bytes,
                                  const std::shared_ptr<Event>& after) {
    Queue& queue = device_.host_to_device_queue();
    queue.Wait(device_.compute_queue().Record());
    if (after) queue.Wait(after);
    device_.CopyAsync(device, host, bytes, CopyKind::kHostToDevice, queue);
    return queue.Record();
  }

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
  std::shared_ptr<Event> CopyIn(size_t, size_t, size_t, const std::shared_ptr<Event>&) override {
    return nullptr;
  }
  std::shared_ptr<Event> CopySliceIn(void*, size_t, size_t,
                                     const std::shared_ptr<Event>&) override {
    return nullptr;
  }
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
  std::shared_ptr<Event> UpdateInHostMemory(const SlotUpdate&, const ParameterSlot&, float*, float*,
                                            const std::vector<float*>&) override {
    return nullptr;
  }
};

}  // namespace

std::unique_ptr<Backing> MakeDeviceBacking(Device& device) {
  return std::make_unique<DeviceBacking>(device);
}

std::unique_ptr<Backing> MakePlanningBacking() { return std::make_unique<PlanningBacking>(); }

}  // namespace spill
