#include "framework/device_registry.h"

#include <map>
#include <new>
#include <system_error>

#include "framework/cpu_device.h"

namespace spill {
namespace {

struct Entry {
  DeviceType type;
  DeviceFactory factory;
};

std::map<std::string, Entry>& Registry() {
  static auto* registry = new std::map<std::string, Entry>{
      {"cpu", {DeviceType::kCpu, [](const DeviceConfig& c) -> StatusOr<std::unique_ptr<Device>> {
                 return std::unique_ptr<Device>(
                     new CpuDevice(CpuDeviceOptions{c.link_bytes_per_second}));
               }}}};
  return *registry;
}

}  // namespace

bool RegisterDeviceFactory(const std::string& name, DeviceType type, DeviceFactory factory) {
  Registry()[name] = {type, std::move(factory)};
  return true;
}

StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& name,
                                               const DeviceConfig& config) {
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    if (name == "cuda") {
      return Unimplemented(
          "this build has no CUDA backend; build with: bazel build --config=cuda //tools:train");
    }
    return InvalidArgument("unknown device '" + name + "'; expected cpu or cuda");
  }
  // A device starts threads and reserves memory: failures of either are
  // errors to report, not reasons to end the process.
  try {
    return it->second.factory(config);
  } catch (const std::system_error& e) {
    return OutOfMemory("cannot start the " + name + " device: " + e.what());
  } catch (const std::bad_alloc&) {
    return OutOfMemory("not enough host memory to start the " + name + " device");
  }
}

namespace {

std::map<DeviceType, NetCalibration>& Calibrations() {
  static auto* calibrations = new std::map<DeviceType, NetCalibration>();
  return *calibrations;
}

}  // namespace

bool RegisterNetCalibration(DeviceType type, NetCalibration calibration) {
  Calibrations()[type] = std::move(calibration);
  return true;
}

Status CalibrateNet(const Net& net, Device& device) {
  auto it = Calibrations().find(device.type());
  return it == Calibrations().end() ? Status::Ok() : it->second(net, device);
}

StatusOr<DeviceType> DeviceTypeByName(const std::string& name) {
  if (name == "cpu") return DeviceType::kCpu;
  if (name == "cuda") return DeviceType::kCuda;
  return InvalidArgument("unknown device '" + name + "'; expected cpu or cuda");
}

}  // namespace spill
