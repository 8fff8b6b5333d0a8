// Devices by name ("cpu", "cuda"), so tools choose a backend at run time. A
// backend's library registers its factory; the CUDA one is linked only into
// --config=cuda builds.
#ifndef SPILL_FRAMEWORK_DEVICE_DEVICE_REGISTRY_H_
#define SPILL_FRAMEWORK_DEVICE_DEVICE_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>

#include "framework/device/device.h"

namespace spill {

struct DeviceConfig {
  int ordinal = 0;                   // which GPU
  double link_bytes_per_second = 0;  // CPU device: copy throttle
  // CUDA: TF32 tensor-core math for convolutions and matrix products
  // (run.precision tf32); otherwise exact float32 arithmetic.
  bool tensor_math = false;
};

using DeviceFactory = std::function<StatusOr<std::unique_ptr<Device>>(const DeviceConfig&)>;

bool RegisterDeviceFactory(const std::string& name, DeviceType type, DeviceFactory factory);
StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& name, const DeviceConfig& config);
StatusOr<DeviceType> DeviceTypeByName(const std::string& name);

// Work a backend does on a built network before its memory is reserved (the
// CUDA backend times cuDNN's convolution algorithms there). Backends
// register one; CalibrateNet runs the one of the device's type, if any.
class Net;
using NetCalibration = std::function<Status(const Net& net, Device& device)>;
bool RegisterNetCalibration(DeviceType type, NetCalibration calibration);
Status CalibrateNet(const Net& net, Device& device);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_DEVICE_DEVICE_REGISTRY_H_
