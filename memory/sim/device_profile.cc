// The named device profiles. Each GPU value is the public spec-sheet figure,
// cited beside it; what a device achieves of it is an assumption, stated
// once here and applied to every GPU alike:
//
//   kGpuFlopsEfficiency  0.6  fp32 convolutions and matrix products (cuDNN
//                             and cuBLAS reach roughly half to three
//                             quarters of peak on large layers)
//   kGpuMatrixEfficiency 0.4  convolutions and matrix products on the tensor
//                             cores (TF32, fp16, bf16): a smaller share of a
//                             peak 8-16x higher, since their operands must
//                             still come through memory
//   kGpuMemoryEfficiency 0.8  elementwise kernels and device-to-device copies
//   kPcieEfficiency      0.75 pinned copies over PCIe (a K40m measured
//                             10.0 GB/s of PCIe 3's 15.75: Microway,
//                             "NVIDIA Tesla K40 Atlas GPU accelerator up
//                             close", bandwidthTest --memory=pinned)
//   kNvlinkEfficiency    0.9  pinned copies over NVLink
//   kCopyLatency         10 us per copy (issue and DMA setup)
//   kNetworkEfficiency   0.8  MPI messages over InfiniBand, of the line rate
//   kNetworkLatency      5 us per gather (the ranks' agreement and messages)
//   kKernelSeconds       5 us per computation (launch and tail)
//
// Link bandwidths are per direction: PCIe 3.0 x16 carries 8 GT/s x 16 lanes
// x 128/130 = 15.75 GB/s each way, PCIe 5.0 x16 32 GT/s -> 63.0 GB/s (PCI-SIG
// base specifications 3.0 and 5.0), NVLink 2.0 25 GB/s per link each way
// (NVIDIA Tesla V100 datasheet: 6 links, 300 GB/s in total).
//
// Matrix units: every peak is the dense one (the spec sheets' TF32, fp16
// and bf16 figures with sparsity are twice these). The K40, TITAN X and GTX
// 1080 Ti have none; the V100 has fp16 tensor cores only.
//
// The network: one InfiniBand adapter per GPU, of the generation sold with
// it: EDR, 100 Gb/s = 12.5 GB/s each way (Mellanox ConnectX-4 product
// brief), beside the K40 to V100; NDR, 400 Gb/s = 50 GB/s (NVIDIA
// ConnectX-7 product brief, as in DGX H100), beside the H100 and H200.
#include "memory/sim/device_profile.h"

#include <cstdio>
#include <utility>

#include "framework/base/strings.h"

namespace spill {
namespace {

constexpr double kGiga = 1e9, kTera = 1e12;
constexpr double kGpuFlopsEfficiency = 0.6;
constexpr double kGpuMatrixEfficiency = 0.4;
constexpr double kGpuMemoryEfficiency = 0.8;
constexpr double kPcieEfficiency = 0.75;
constexpr double kNvlinkEfficiency = 0.9;
constexpr double kCopyLatencySeconds = 10e-6;
constexpr double kKernelSeconds = 5e-6;
constexpr double kPcie3BytesPerSecond = 15.75 * kGiga;
constexpr double kPcie5BytesPerSecond = 63.0 * kGiga;
constexpr double kNvlink2LinkBytesPerSecond = 25 * kGiga;
constexpr double kNetworkEfficiency = 0.8;
constexpr double kNetworkLatencySeconds = 5e-6;
constexpr double kEdrBytesPerSecond = 12.5 * kGiga;
constexpr double kNdrBytesPerSecond = 50 * kGiga;

DeviceProfile Gpu(const char* name, const char* description, double peak_flops,
                  double memory_bytes_per_second, double link_bytes_per_second,
                  double network_bytes_per_second = kEdrBytesPerSecond) {
  DeviceProfile p;
  p.name = name;
  p.description = description;
  p.peak_flops = peak_flops;
  p.flops_efficiency = kGpuFlopsEfficiency;
  p.matrix_efficiency = kGpuMatrixEfficiency;
  p.memory_bytes_per_second = memory_bytes_per_second;
  p.memory_efficiency = kGpuMemoryEfficiency;
  p.kernel_seconds = kKernelSeconds;
  p.link.h2d_bytes_per_second = p.link.d2h_bytes_per_second = link_bytes_per_second;
  p.link.latency_seconds = kCopyLatencySeconds;
  p.network_bytes_per_second = network_bytes_per_second * kNetworkEfficiency;
  p.network_latency_seconds = kNetworkLatencySeconds;
  p.inline_compute = false;
  return p;
}

// `p` with matrix units of these dense peaks.
DeviceProfile WithMatrixUnits(DeviceProfile p, double tf32, double fp16, double bf16) {
  p.peak_flops_tf32 = tf32;
  p.peak_flops_fp16 = fp16;
  p.peak_flops_bf16 = bf16;
  return p;
}

// NVIDIA H200 product brief (SXM): 67 TFLOPS fp32, 4.8 TB/s HBM3e, PCIe
// Gen5 x16 to the host. The one profile calibrated from a run: spill's
// ResNet-50 at batch 64, 224x224, on one H200 (tools/bench/RESULTS.md, "On
// an NVIDIA H200") took 105.3 ms per step (608 images/s); the cost model
// gives that step time on these rates at kH200FlopsEfficiency. The link
// keeps the PCIe assumption: no copy rate has been measured on it. Matrix
// units as the H100 SXM's (the same GH100 chip): 494.7 TFLOPS TF32, 989.4
// fp16 and bf16. No TF32 or 16-bit step of spill has been measured on it, so
// they get the share of the assumed efficiency that the float32 calibration
// found (0.257 of an assumed 0.6).
constexpr double kH200FlopsEfficiency = 0.257;
constexpr double kH200MatrixEfficiency =
    kGpuMatrixEfficiency * kH200FlopsEfficiency / kGpuFlopsEfficiency;

DeviceProfile H200() {
  DeviceProfile p = WithMatrixUnits(
      Gpu("h200", "NVIDIA H200 over PCIe 5.0 x16, compute calibrated on ResNet-50", 67 * kTera,
          4800 * kGiga, kPcie5BytesPerSecond * kPcieEfficiency, kNdrBytesPerSecond),
      494.7 * kTera, 989.4 * kTera, 989.4 * kTera);
  p.flops_efficiency = kH200FlopsEfficiency;
  p.matrix_efficiency = kH200MatrixEfficiency;
  return p;
}

std::vector<DeviceProfile> GpuProfiles() {
  return {
      // NVIDIA Tesla K40 datasheet: 4.29 TFLOPS fp32 peak (2880 cores at the
      // 745 MHz base clock), 288 GB/s GDDR5, PCIe Gen3 x16.
      Gpu("k40-pcie3", "NVIDIA Tesla K40 over PCIe 3.0 x16", 4.29 * kTera, 288 * kGiga,
          kPcie3BytesPerSecond * kPcieEfficiency),
      // NVIDIA GeForce GTX TITAN X (Maxwell, GM200) specifications: 3072
      // cores, 1075 MHz boost clock -> 2 x 3072 x 1.075 GHz = 6.6 TFLOPS;
      // 336.5 GB/s GDDR5; PCIe 3.0 x16.
      Gpu("titanx-pcie3", "NVIDIA GeForce GTX TITAN X (Maxwell) over PCIe 3.0 x16", 6.6 * kTera,
          336.5 * kGiga, kPcie3BytesPerSecond * kPcieEfficiency),
      // NVIDIA GeForce GTX 1080 Ti specifications (the card of the DQN
      // planner's paper): 3584 cores at the 1582 MHz boost clock -> 2 x 3584
      // x 1.582 GHz = 11.3 TFLOPS; 484 GB/s GDDR5X (11 Gbps on a 352-bit
      // bus); PCIe 3.0 x16.
      Gpu("gtx1080ti-pcie3", "NVIDIA GeForce GTX 1080 Ti over PCIe 3.0 x16", 11.34 * kTera,
          484 * kGiga, kPcie3BytesPerSecond * kPcieEfficiency),
      // NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOPS fp32, 125 TFLOPS
      // fp16 on the tensor cores, 900 GB/s HBM2. Host link as in IBM POWER9
      // systems: two NVLink 2.0 links to the CPU.
      WithMatrixUnits(
          Gpu("v100-nvlink2", "NVIDIA Tesla V100 SXM2 over two NVLink 2.0 links to a POWER9 host",
              15.7 * kTera, 900 * kGiga, 2 * kNvlink2LinkBytesPerSecond * kNvlinkEfficiency),
          0, 125 * kTera, 0),
      // NVIDIA H100 PCIe product brief (PB-11133-001): 51 TFLOPS fp32; TF32
      // 756 and fp16 and bf16 1,513 TFLOPS with sparsity, so 378 and 756.5
      // dense; 2.0 TB/s HBM2e, PCIe Gen5 x16 (128 GB/s both ways together).
      WithMatrixUnits(Gpu("h100-pcie5", "NVIDIA H100 PCIe over PCIe 5.0 x16", 51 * kTera,
                          2000 * kGiga, kPcie5BytesPerSecond * kPcieEfficiency, kNdrBytesPerSecond),
                      378 * kTera, 756.5 * kTera, 756.5 * kTera),
      H200(),
  };
}

}  // namespace

std::vector<std::string> DeviceProfileNames() {
  std::vector<std::string> names = {"cpu"};
  for (const DeviceProfile& p : GpuProfiles()) names.push_back(p.name);
  return names;
}

StatusOr<DeviceProfile> FindDeviceProfile(const std::string& name) {
  for (const DeviceProfile& p : GpuProfiles()) {
    if (p.name == name) return p;
  }
  return InvalidArgument("unknown device profile '" + name +
                         "' (known: " + Join(DeviceProfileNames()) + ")");
}

DeviceProfile CpuProfile(const CpuCalibration& c, double link_bytes_per_second) {
  DeviceProfile p;
  p.name = "cpu";
  p.description = "this CPU as calibrated";
  // Measured rates: the model assumes layers reach SGEMM speed and a large
  // copy's bandwidth (efficiency 1); measured step times replace it.
  p.peak_flops = c.gemm_flops;
  p.peak_flops_bf16 = c.bf16_gemm_flops;
  p.memory_bytes_per_second = c.memory_bytes_per_second;
  const double link = link_bytes_per_second > 0 ? link_bytes_per_second : c.memcpy_bytes_per_second;
  p.link.h2d_bytes_per_second = p.link.d2h_bytes_per_second = link;
  p.link.latency_seconds = c.copy_latency_seconds;
  // The CPU device compacts with one memmove on the compute thread.
  p.move_bytes_per_second = c.memcpy_bytes_per_second;
  p.inline_compute = true;
  if (link_bytes_per_second > 0) p.description += ", link throttled";
  return p;
}

namespace {

std::string NetworkRate(const DeviceProfile& p) {
  if (p.network_bytes_per_second <= 0) return "";
  char text[64];
  std::snprintf(text, sizeof(text), ", network %.1f GB/s each way",
                p.network_bytes_per_second / 1e9);
  return text;
}

std::string MatrixUnits(const DeviceProfile& p) {
  std::string text;
  const std::pair<const char*, double> units[] = {
      {"TF32", p.peak_flops_tf32}, {"fp16", p.peak_flops_fp16}, {"bf16", p.peak_flops_bf16}};
  for (const auto& [name, peak] : units) {
    if (peak <= 0) continue;
    char rate[64];
    std::snprintf(rate, sizeof(rate), "%s%s %.1f", text.empty() ? "" : ", ", name, peak / 1e12);
    text += rate;
  }
  if (text.empty()) return "";
  char efficiency[32];
  std::snprintf(efficiency, sizeof(efficiency), " TFLOP/s x %.2f", p.matrix_efficiency);
  return " (matrix units: " + text + efficiency + ")";
}

std::string MapCost(const DeviceProfile& p) {
  if (p.map_seconds_per_chunk <= 0) return "";
  char text[64];
  std::snprintf(text, sizeof(text), ", %.0f us per chunk mapped or unmapped",
                p.map_seconds_per_chunk * 1e6);
  return text;
}

}  // namespace

std::string DescribeDeviceProfile(const DeviceProfile& p) {
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "%s (%s): %.2f TFLOP/s x %.2f%s, memory %.0f GB/s x %.2f, link %.2f GB/s to device, "
      "%.2f GB/s to host, %s, %.0f us per copy%s%s%s",
      p.name.c_str(), p.description.c_str(), p.peak_flops / 1e12, p.flops_efficiency,
      MatrixUnits(p).c_str(), p.memory_bytes_per_second / 1e9, p.memory_efficiency,
      p.link.h2d_bytes_per_second / 1e9, p.link.d2h_bytes_per_second / 1e9,
      p.link.duplex ? "both at once" : "one way at a time", p.link.latency_seconds * 1e6,
      NetworkRate(p).c_str(), p.inline_compute ? ", compute inline on the host thread" : "",
      MapCost(p).c_str());
  return line;
}

}  // namespace spill
