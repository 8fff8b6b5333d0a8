// Device profiles: how fast a device computes, how fast its memory and its
// host link move bytes, and whether its compute runs on the host thread.
// The timeline simulator (timeline.h) turns a memory plan into time with
// one of them.
//
// The GPU profiles are public spec-sheet values (cited next to each in
// device_profile.cc) times stated efficiency factors, so every time computed
// from them is a simulation, not a measurement; "h200" alone has its
// compute efficiency calibrated from a measured run of spill on that GPU. The "cpu" profile is this
// machine, calibrated when it is first asked for (tools/common/timeline_tools.h): its numbers are
// measured.
#ifndef SPILL_MEMORY_SIM_DEVICE_PROFILE_H_
#define SPILL_MEMORY_SIM_DEVICE_PROFILE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/schedule/declarations.h"

namespace spill {

// The host<->device link, per direction. A copy of B bytes takes
// latency + B / bandwidth. Duplex: a copy engine each way, so a copy to the
// device and one to the host run at once, each at its direction's rate
// (every GPU since Kepler; PCIe and NVLink carry both ways at full rate);
// otherwise one copy at a time.
struct LinkProfile {
  double h2d_bytes_per_second = 0;
  double d2h_bytes_per_second = 0;
  double latency_seconds = 0;
  bool duplex = true;
};

// When each copy queue is next free. A duplex link has an engine each way,
// so the two directions run at once; otherwise both wait for one engine.
// The simulator and the evaluator (memory/evaluate.cc) share it.
class CopyClocks {
 public:
  explicit CopyClocks(const LinkProfile& link) : duplex_(link.duplex) {}
  // The clock a copy in this direction runs on.
  double& of(bool to_host) { return to_host && duplex_ ? to_host_ : to_device_; }
  // When every copy queued so far has finished.
  double latest() const { return std::max(to_device_, to_host_); }

 private:
  bool duplex_;
  double to_device_ = 0, to_host_ = 0;
};

struct DeviceProfile {
  std::string name;
  std::string description;
  // Compute: fp32 operations per second at peak, and the fraction a
  // convolution or matrix product is assumed to reach.
  double peak_flops = 0;
  double flops_efficiency = 1;
  // The matrix units' dense peaks (no sparsity) in TF32, fp16 and bf16 (16-
  // bit operands, float32 sums), and the fraction a convolution or matrix
  // product reaches of them. 0: that arithmetic runs at the fp32 rate (no
  // such units: fp16 storage computed in float32, as cuDNN does on GPUs
  // before Volta).
  double peak_flops_tf32 = 0;
  double peak_flops_fp16 = 0;
  double peak_flops_bf16 = 0;
  double matrix_efficiency = 1;
  // Device memory bandwidth at peak, and the fraction elementwise kernels
  // and device-to-device moves are assumed to reach.
  double memory_bytes_per_second = 0;
  double memory_efficiency = 1;
  // Bytes a device-to-device move (compaction) carries per second; 0: half
  // the achieved memory bandwidth (each byte is read and written).
  double move_bytes_per_second = 0;
  // Fixed cost of each computation: kernel launch and tail on a GPU.
  double kernel_seconds = 0;
  LinkProfile link;
  // The network between data-parallel ranks, from this device's node, each
  // way: what a sharded parameter's gather (distributed.zero 3) receives
  // crosses it at this rate, one gather after another. 0: not modelled.
  double network_bytes_per_second = 0;
  double network_latency_seconds = 0;
  // Host seconds to map or unmap one physical chunk (the va allocator's
  // driver calls). No spec sheet gives it: 0 unless set (`plan --map-us`).
  double map_seconds_per_chunk = 0;
  // True for the CPU device: compute runs inline on the host thread, so the
  // host waits whenever compute would. False: the host enqueues
  // asynchronously and blocks only where it waits for an event.
  bool inline_compute = false;

  double achieved_flops() const { return peak_flops * flops_efficiency; }
  // In `arithmetic`: its matrix units' rate, or the fp32 rate without them.
  double achieved_flops(Arithmetic arithmetic) const {
    const double peak = arithmetic == Arithmetic::kTf32   ? peak_flops_tf32
                        : arithmetic == Arithmetic::kFp16 ? peak_flops_fp16
                        : arithmetic == Arithmetic::kBf16 ? peak_flops_bf16
                                                          : 0;
    return peak > 0 ? peak * matrix_efficiency : achieved_flops();
  }
  double achieved_memory_bandwidth() const { return memory_bytes_per_second * memory_efficiency; }
  double move_bandwidth() const {
    return move_bytes_per_second > 0 ? move_bytes_per_second : achieved_memory_bandwidth() / 2;
  }
};

// The name of this machine's measured profile (CpuProfile).
inline constexpr char kMeasuredProfile[] = "cpu";

// The spec-sheet profiles ("k40-pcie3", "titanx-pcie3", "gtx1080ti-pcie3",
// "v100-nvlink2", "h100-pcie5", "h200"); "cpu" is listed too but built by
// CpuProfile.
std::vector<std::string> DeviceProfileNames();
// A spec-sheet profile by name; an unknown name is an error that lists the
// known ones.
StatusOr<DeviceProfile> FindDeviceProfile(const std::string& name);

// What a calibration of this CPU measured (tools/common/timeline_tools.cc).
struct CpuCalibration {
  double gemm_flops = 0;               // SGEMM on every core
  double memory_bytes_per_second = 0;  // a large copy on every core, bytes read + written
  double memcpy_bytes_per_second = 0;  // one thread's memcpy: the copy worker's link
  double copy_latency_seconds = 0;     // a small copy through the copy worker and its event
  double bf16_gemm_flops = 0;          // a bf16 matrix product on every core; 0: no AVX-512 BF16
};
// This CPU as calibrated. `link_bytes_per_second` > 0: the copy worker is
// throttled to it (`--link-gbps`), otherwise copies run at memcpy speed.
DeviceProfile CpuProfile(const CpuCalibration& calibration, double link_bytes_per_second);

// One line per profile: name, compute, memory, link.
std::string DescribeDeviceProfile(const DeviceProfile& profile);

}  // namespace spill

#endif  // SPILL_MEMORY_SIM_DEVICE_PROFILE_H_
