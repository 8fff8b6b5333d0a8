#include "framework/device/device_registry.h"

#include <new>
#include <system_error>

#include "framework/base/registry.h"
#include "framework/device/cpu_device.h"

namespace spill {
namespace {

struct DeviceEntry {
  DeviceType type;
  DeviceFactory factory;
};

Registry<DeviceEntry>& Devices() {
  static auto* registry = [] {
    auto* r = new Registry<DeviceEntry>("device", "devices");
    r->Add(
        "cpu",
        {DeviceType::kCpu, [](const DeviceConfig& c) -> StatusOr<std::unique_ptr<Device>> {
           return std::unique_ptr<Device>(new CpuDevice(CpuDeviceOptions{c.link_bytes_per_second}));
         }});
    return r;
  }();
  return *registry;
}

}  // namespace

bool RegisterDeviceFactory(const std::string& name, DeviceType type, DeviceFactory factory) {
  return Devices().Add(name, {type, std::move(factory)});
}

StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& name,
                                               const DeviceConfig& config) {
  const DeviceEntry* entry = Devices().Find(name);
  if (entry == nullptr) {
    if (name == "cuda") {
      return Unimplemented(
          "this build has no CUDA backend; build with: bazel build --config=cuda //tools:train");
    }
    const bool cuda = Devices().Find("cuda") != nullptr;
    return InvalidArgument(Devices().Unknown(name) +
                           (cuda ? "" : " (cuda comes with --config=cuda)"));
  }
  // A device starts threads and reserves memory: failures of either are
  // errors to report, not reasons to end the process.
  try {
    return entry->factory(config);
  } catch (const std::system_error& e) {
    return OutOfMemory("cannot start the " + name + " device: " + e.what());
  } catch (const std::bad_alloc&) {
    return OutOfMemory("not enough host memory to start the " + name + " device");
  }
}

namespace {

// By device type name.
Registry<NetCalibration>& Calibrations() {
  static auto* calibrations = new Registry<NetCalibration>("device's calibration", "devices");
  return *calibrations;
}

}  // namespace

bool RegisterNetCalibration(DeviceType type, NetCalibration calibration) {
  return Calibrations().Add(DeviceTypeName(type), std::move(calibration));
}

Status CalibrateNet(const Net& net, Device& device) {
  const NetCalibration* calibration = Calibrations().Find(DeviceTypeName(device.type()));
  return calibration == nullptr ? Status::Ok() : (*calibration)(net, device);
}

StatusOr<DeviceType> DeviceTypeByName(const std::string& name) {
  if (name == "cpu") return DeviceType::kCpu;
  if (name == "cuda") return DeviceType::kCuda;
  return InvalidArgument("unknown device '" + name + "'; expected cpu or cuda");
}

}  // namespace spill
