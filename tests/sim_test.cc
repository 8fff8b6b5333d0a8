// The time model: layers' declared work, device profiles, the step time
// cache, the two-queue simulator on hand-made event logs with known answers
// (a copy hidden under compute, a host wait that stalls, compute waiting for
// a prefetch, a drop that does not wait), on real plans (the memory curve
// peaks at the planner's peak; one compute slice per step, one copy slice
// per transfer; vDNN's barrier adds compute waits), and the Chrome trace it
// writes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "framework/device/cpu_device.h"
#include "framework/graph/net.h"
#include "framework/solver/solver.h"
#include "layers/convolution_layer.h"
#include "memory/planning/planner.h"
#include "memory/report/events_json.h"
#include "memory/report/timeline_svg.h"
#include "memory/report/trace_json.h"
#include "memory/sim/cost_model.h"
#include "memory/sim/device_profile.h"
#include "memory/sim/timeline.h"
#include "tests/testing/net_harness.h"
#include "tests/testing/test_networks.h"
#include "tests/testing/trace_reader.h"
#include "tools/common/timeline_tools.h"

namespace spill {
namespace {

constexpr double kTolerance = 1e-9;

// ---------------------------------------------------------------------------
// Declared work

TEST(LayerWorkTest, ConvolutionAndFullyConnectedCountMultiplyAdds) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [3, 10, 10]}
  - {name: conv, type: convolution, filters: 4, kernel: 3, pad: 1, groups: 1}
  - {name: conv2, type: convolution, filters: 6, kernel: 3, groups: 2}
  - {name: fc, type: fully_connected, outputs: 7}
  - {name: loss, type: softmax_loss}
)"),
                        {2, DeviceType::kCpu});
  ASSERT_TRUE(net.ok()) << net.status().ToString();
  const NetworkView view = (*net)->view();
  // conv: N=2, K=4, C=3, R=S=3, H'=W'=10; the bias adds one per output.
  const double conv = 2.0 * 2 * 4 * 3 * 3 * 3 * 10 * 10;
  EXPECT_DOUBLE_EQ(view.layer(1).forward_work.flops, conv + 2 * 4 * 10 * 10);
  // Its input needs no gradient (the data): the filter gradient alone.
  EXPECT_DOUBLE_EQ(view.layer(1).backward_work.flops, conv + 2 * 4 * 10 * 10);
  // conv2: K=6, C/G=2, 8x8 output; backward adds the data gradient.
  const double conv2 = 2.0 * 2 * 6 * 2 * 3 * 3 * 8 * 8;
  EXPECT_DOUBLE_EQ(view.layer(2).forward_work.flops, conv2 + 2 * 6 * 8 * 8);
  EXPECT_DOUBLE_EQ(view.layer(2).backward_work.flops, 2 * conv2 + 2 * 6 * 8 * 8);
  // fc: 2 x 384 inputs x 7 outputs.
  const double fc = 2.0 * 2 * 384 * 7;
  EXPECT_DOUBLE_EQ(view.layer(3).forward_work.flops, fc + 2 * 7);
  EXPECT_DOUBLE_EQ(view.layer(3).backward_work.flops, 2 * fc + 2 * 7);
  // The input layer reads the batch from host memory.
  EXPECT_DOUBLE_EQ(view.layer(0).forward_work.host_bytes, 2 * 3 * 10 * 10 * 4 + 2 * 4);
  EXPECT_GT(view.layer(4).forward_work.bytes, 0);
}

// In 16 bits a layer that computes on 16-bit tensors runs on the matrix
// units at half the traffic; one that computes on float32 copies keeps
// float32 arithmetic and pays for the conversions. TF32 keeps float32
// storage and runs every layer's products on the matrix units.
TEST(LayerWorkTest, EachPrecisionNamesTheArithmeticItsLayersRun) {
  const auto spec = testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [3, 10, 10]}
  - {name: conv, type: convolution, filters: 4, kernel: 3, pad: 1}
  - {name: fc, type: fully_connected, outputs: 7}
  - {name: loss, type: softmax_loss}
)");
  auto view_in = [&](Precision precision) {
    NetOptions options{2, DeviceType::kCpu};
    options.precision = precision;
    auto net = Net::Build(spec, options);
    SPILL_CHECK(net.ok()) << net.status().ToString();
    return (*net)->view();
  };
  const NetworkView fp32 = view_in(Precision::kFp32), bf16 = view_in(Precision::kBf16),
                    fp16 = view_in(Precision::kFp16), tf32 = view_in(Precision::kTf32);
  for (const LayerSummary& l : fp32.layers) {
    EXPECT_EQ(l.forward_work.arithmetic, Arithmetic::kFp32) << l.name;
    EXPECT_EQ(l.backward_work.arithmetic, Arithmetic::kFp32) << l.name;
  }
  for (const LayerSummary& l : tf32.layers) {
    EXPECT_EQ(l.forward_work.arithmetic, Arithmetic::kTf32) << l.name;
  }
  // The convolution computes on its 16-bit tensors.
  EXPECT_EQ(bf16.layer(1).forward_work.arithmetic, Arithmetic::kBf16);
  EXPECT_EQ(bf16.layer(1).backward_work.arithmetic, Arithmetic::kBf16);
  EXPECT_EQ(fp16.layer(1).forward_work.arithmetic, Arithmetic::kFp16);
  EXPECT_DOUBLE_EQ(bf16.layer(1).forward_work.bytes, fp32.layer(1).forward_work.bytes / 2);
  EXPECT_DOUBLE_EQ(bf16.layer(1).forward_work.flops, fp32.layer(1).forward_work.flops);
  // The fully connected layer computes on float32 copies of its input.
  EXPECT_EQ(bf16.layer(2).forward_work.arithmetic, Arithmetic::kFp32);
  EXPECT_GT(bf16.layer(2).forward_work.bytes, fp32.layer(2).forward_work.bytes);
}

// ---------------------------------------------------------------------------
// Profiles and the step time cache

TEST(DeviceProfileTest, NamedProfilesAndAClearErrorForUnknownOnes) {
  for (const std::string& name : DeviceProfileNames()) {
    if (name == "cpu") continue;
    auto p = FindDeviceProfile(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_GT(p->achieved_flops(), 1e12);
    EXPECT_GT(p->link.h2d_bytes_per_second, 1e9);
    EXPECT_TRUE(p->link.duplex) << name << ": a copy engine each way since Kepler";
    EXPECT_FALSE(p->inline_compute);
  }
  EXPECT_TRUE(FindDeviceProfile("h200").ok());
  auto missing = FindDeviceProfile("tpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("titanx-pcie3"), std::string::npos);
  CpuCalibration c{1e11, 2e10, 5e9, 1e-4};
  const DeviceProfile cpu = CpuProfile(c, 1e9);
  EXPECT_TRUE(cpu.inline_compute);
  EXPECT_EQ(cpu.link.d2h_bytes_per_second, 1e9);
  EXPECT_EQ(CpuProfile(c, 0).link.d2h_bytes_per_second, 5e9);  // unthrottled: memcpy
}

// A product's time on each profile's matrix units, or at the float32 rate
// where it has none of that arithmetic.
TEST(DeviceProfileTest, MatrixUnitsComputeWhatTheyHaveAndFloat32TheRest) {
  LayerWork work;
  work.flops = 1e12;  // compute-bound: no bytes
  auto seconds = [&](const DeviceProfile& p, Arithmetic a) {
    work.arithmetic = a;
    return RooflineSeconds(work, p) - p.kernel_seconds;
  };
  const DeviceProfile h100 = *FindDeviceProfile("h100-pcie5");
  const double fp32 = seconds(h100, Arithmetic::kFp32);
  EXPECT_NEAR(fp32, 1e12 / (51e12 * 0.6), kTolerance);
  EXPECT_NEAR(seconds(h100, Arithmetic::kBf16), 1e12 / (756.5e12 * 0.4), kTolerance);
  EXPECT_NEAR(seconds(h100, Arithmetic::kFp16), 1e12 / (756.5e12 * 0.4), kTolerance);
  EXPECT_NEAR(seconds(h100, Arithmetic::kTf32), 1e12 / (378e12 * 0.4), kTolerance);
  // The V100's tensor cores take fp16 only; the K40 has none.
  const DeviceProfile v100 = *FindDeviceProfile("v100-nvlink2");
  EXPECT_LT(seconds(v100, Arithmetic::kFp16), seconds(v100, Arithmetic::kFp32) / 4);
  EXPECT_DOUBLE_EQ(seconds(v100, Arithmetic::kBf16), seconds(v100, Arithmetic::kFp32));
  EXPECT_DOUBLE_EQ(seconds(v100, Arithmetic::kTf32), seconds(v100, Arithmetic::kFp32));
  const DeviceProfile k40 = *FindDeviceProfile("k40-pcie3");
  for (Arithmetic a : {Arithmetic::kTf32, Arithmetic::kFp16, Arithmetic::kBf16}) {
    EXPECT_DOUBLE_EQ(seconds(k40, a), seconds(k40, Arithmetic::kFp32));
  }
  EXPECT_NE(DescribeDeviceProfile(h100).find("bf16 756.5"), std::string::npos)
      << DescribeDeviceProfile(h100);
  EXPECT_EQ(DescribeDeviceProfile(k40).find("matrix units"), std::string::npos);
  // The CPU: bf16 at its calibrated rate, where it has one.
  CpuCalibration c{1e11, 2e10, 5e9, 1e-4, 4e11};
  EXPECT_NEAR(seconds(CpuProfile(c, 0), Arithmetic::kBf16), 1e12 / 4e11, kTolerance);
  c.bf16_gemm_flops = 0;
  EXPECT_NEAR(seconds(CpuProfile(c, 0), Arithmetic::kBf16), 1e12 / 1e11, kTolerance);
}

// Step times measured in one precision or layout are not another's: the
// signature that keys them (and the planners' caches) tells them apart.
TEST(StepTimesTest, EachPrecisionAndLayoutHasItsOwnSignature) {
  const auto spec = testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [3, 8, 8]}
  - {name: conv1, type: convolution, filters: 16, kernel: 3, pad: 1}
  - {name: relu, type: relu}
  - {name: conv2, type: convolution, filters: 16, kernel: 3, pad: 1}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: loss, type: softmax_loss}
)");
  bool blocked_somewhere = false;
  auto signature = [&](Precision precision, bool blocked) {
    NetOptions options{2, DeviceType::kCpu};
    options.precision = precision;
    options.blocked_layouts = blocked;
    auto net = Net::Build(spec, options);
    SPILL_CHECK(net.ok()) << net.status().ToString();
    for (const TensorInfo& t : (*net)->schedule().tensors) {
      blocked_somewhere |= t.layout != Layout::kPlain;
    }
    return NetworkSignature((*net)->view());
  };
  const std::string plain = signature(Precision::kFp32, false);
  EXPECT_EQ(signature(Precision::kFp32, false), plain);
  EXPECT_NE(signature(Precision::kBf16, false), plain);
  // Blocked layouts where this processor computes in them.
  const std::string blocked = signature(Precision::kFp32, true);
  if (blocked_somewhere) EXPECT_NE(blocked, plain);
}

TEST(StepTimesTest, CacheKeepsEveryDigitAndOtherNetworks) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("spill_steps_" + std::to_string(getpid())))
          .string();
  StepTimes a;
  a.Add("conv1", Pass::kForward, "dnnl", 0.1);
  a.Add("conv1", Pass::kForward, "dnnl", 0.2);
  a.Add("conv1", Pass::kBackward, "direct direct", 1.0 / 3);
  a.AddUpdate(0.05);
  ASSERT_TRUE(a.Save(path, "net-a").ok());
  StepTimes b;
  b.Add("fc", Pass::kForward, "", 2.0);
  ASSERT_TRUE(b.Save(path, "net-b").ok());
  auto loaded = StepTimes::Load(path, "net-a");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_DOUBLE_EQ(loaded->Find("conv1", Pass::kForward, "dnnl"), 0.15);
  EXPECT_EQ(loaded->Find("conv1", Pass::kBackward, "direct direct"), 1.0 / 3);
  EXPECT_DOUBLE_EQ(loaded->update_seconds(), 0.05);
  EXPECT_LT(loaded->Find("conv1", Pass::kForward, "direct"), 0);
  EXPECT_DOUBLE_EQ(StepTimes::Load(path, "net-b")->Find("fc", Pass::kForward, ""), 2.0);
  std::ofstream(path, std::ios::app) << "net-a\tconv1\tsideways\tx\t1\t1\n";
  auto bad = StepTimes::Load(path, "net-a");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":5:"), std::string::npos) << bad.status().message();
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------
// The simulator on hand-made event logs

class HandMadeLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto net = Net::Build(testing::MustParse(testing::kLeNet), {2, DeviceType::kCpu});
    ASSERT_TRUE(net.ok());
    net_ = std::move(*net);
    view_ = net_->view();
    const size_t steps = net_->schedule().steps.size();
    costs_.step_seconds.assign(steps, 1.0);  // every step: one second
    costs_.recompute_seconds.assign(net_->num_layers(), 0.5);
    costs_.sync_after.assign(steps, false);
    profile_.link = {1e9, 1e9, 0};  // 1 GB/s each way, no latency
    profile_.memory_bytes_per_second = 1e9;
  }
  MemoryEvent Event(MemoryEventType type, int step, TensorId tensor = kNoTensor, size_t bytes = 0) {
    MemoryEvent e;
    e.type = type;
    e.step = step;
    e.tensor = tensor;
    e.bytes = bytes;
    if (type == MemoryEventType::kCompute) e.layer = net_->schedule().steps[step].layer;
    return e;
  }
  TimelineSummary Run(const std::vector<MemoryEvent>& events, bool inline_compute) {
    profile_.inline_compute = inline_compute;
    timeline_ = SimulateIteration(view_, events, costs_, profile_, DeviceBytes{});
    return Summarize(timeline_);
  }

  std::unique_ptr<Net> net_;
  NetworkView view_;
  IterationCosts costs_;
  DeviceProfile profile_;
  Timeline timeline_;
  const TensorId t_ = 1;
};

// Offloaded after step 0, needed gone after step 1: the 0.5 s copy runs
// under step 1's compute and costs nothing.
TEST_F(HandMadeLogTest, CopyHiddenUnderCompute) {
  using T = MemoryEventType;
  const std::vector<MemoryEvent> events = {
      Event(T::kCompute, 0),        Event(T::kBeginOffload, 0, t_, 500000000),
      Event(T::kCompute, 1),        Event(T::kFinishOffload, 1, t_),
      Event(T::kFree, 1, t_, 1024), Event(T::kCompute, 2)};
  for (bool inline_compute : {true, false}) {
    const TimelineSummary s = Run(events, inline_compute);
    EXPECT_NEAR(s.iteration_seconds, 3.0, kTolerance) << inline_compute;
    EXPECT_NEAR(s.copy_seconds, 0.5, kTolerance);
    EXPECT_NEAR(s.overlap(), 1.0, kTolerance);
    EXPECT_NEAR(s.compute_wait_seconds, 0, kTolerance);
    // The CPU host reaches the wait after the copy; a GPU host, enqueueing
    // ahead, blocks there while compute keeps running.
    EXPECT_NEAR(s.host_wait_seconds, inline_compute ? 0 : 1.5, kTolerance);
  }
}

// A 2 s copy the host must wait for right after step 0: on the CPU device
// compute stands still for 2 s.
TEST_F(HandMadeLogTest, HostWaitStallsInlineCompute) {
  using T = MemoryEventType;
  const std::vector<MemoryEvent> events = {
      Event(T::kCompute, 0), Event(T::kBeginOffload, 0, t_, 2000000000),
      Event(T::kFinishOffload, 0, t_), Event(T::kFree, 0, t_, 1024), Event(T::kCompute, 1)};
  const TimelineSummary s = Run(events, /*inline_compute=*/true);
  EXPECT_NEAR(s.iteration_seconds, 4.0, kTolerance);
  EXPECT_NEAR(s.host_wait_seconds, 2.0, kTolerance);
  EXPECT_NEAR(s.overlap(), 0.0, kTolerance);
  // The GPU-like host does not compute: step 1 still waits for nothing but
  // its enqueue, which comes after the host's wait.
  EXPECT_NEAR(Run(events, false).iteration_seconds, 4.0, kTolerance);
}

// A prefetch issued after step 0 takes 1.5 s; step 1 reads it, so the
// compute queue idles from 1.0 to 2.5 (the host does not block).
TEST_F(HandMadeLogTest, ComputeWaitsForPrefetch) {
  using T = MemoryEventType;
  const std::vector<MemoryEvent> events = {Event(T::kCompute, 0),
                                           Event(T::kBeginPrefetch, 0, t_, 1500000000),
                                           Event(T::kFinishPrefetch, 1, t_), Event(T::kCompute, 1)};
  for (bool inline_compute : {true, false}) {
    const TimelineSummary s = Run(events, inline_compute);
    EXPECT_NEAR(s.iteration_seconds, 3.5, kTolerance);
    EXPECT_NEAR(s.compute_wait_seconds, 1.5, kTolerance);
    EXPECT_NEAR(s.host_wait_seconds, 0, kTolerance);
  }
}

// A sharded parameter's gather (distributed.zero 3) begins after step 0's
// compute is enqueued and crosses the network in 1.5 s; step 1 reads it, so
// the compute queue waits for it, then copies it in from host memory. With
// no network in the profile only the copy in remains.
TEST_F(HandMadeLogTest, GatherCrossesTheNetworkAndComputeWaitsForIt) {
  using T = MemoryEventType;
  const std::vector<MemoryEvent> events = {Event(T::kCompute, 0),
                                           Event(T::kBeginGather, 0, t_, 1500000000),
                                           Event(T::kFinishGather, 1, t_), Event(T::kCompute, 1)};
  const double copy_in = static_cast<double>(net_->schedule().tensors[t_].bytes) / 1e9;
  profile_.network_bytes_per_second = 1e9;
  for (bool inline_compute : {true, false}) {
    const TimelineSummary s = Run(events, inline_compute);
    // Inline, the host issues the gather after computing step 0 (at 1 s);
    // a GPU host issues it at once, while step 0 computes.
    const double gathered = inline_compute ? 2.5 : 1.5;
    EXPECT_NEAR(s.network_seconds, 1.5, kTolerance) << inline_compute;
    EXPECT_NEAR(s.hidden_network_seconds, inline_compute ? 0 : 1.0, kTolerance);
    EXPECT_NEAR(s.iteration_seconds, gathered + copy_in + 1.0, kTolerance) << inline_compute;
    EXPECT_NEAR(s.compute_wait_seconds, gathered - 1.0, kTolerance) << inline_compute;
    const auto network =
        std::count_if(timeline_.slices.begin(), timeline_.slices.end(),
                      [](const TimelineSlice& x) { return x.lane == Lane::kNetwork; });
    EXPECT_EQ(network, 1);
  }
  profile_.network_bytes_per_second = 0;
  const TimelineSummary s = Run(events, /*inline_compute=*/false);
  EXPECT_NEAR(s.network_seconds, 0, kTolerance);
  EXPECT_NEAR(s.iteration_seconds, 2.0 + copy_in, kTolerance);
}

// Data parallelism: a gradient's reduce-scatter leaves once the backward
// that made it has run (1 s), taking 2 s to send while step 1 computes; the
// update (1 s) waits for it, and the all-gather after it (0.5 s) ends the
// iteration. Sending and receiving run at once.
TEST_F(HandMadeLogTest, ReductionsCrossTheNetworkAroundTheUpdate) {
  using T = MemoryEventType;
  profile_.network_bytes_per_second = 1e9;
  costs_.update_seconds = 1.0;
  const std::vector<MemoryEvent> events = {
      Event(T::kCompute, 0), Event(T::kReduceScatter, 0, t_, 2000000000), Event(T::kCompute, 1),
      Event(T::kAllGather, 1, kNoTensor, 500000000)};
  const TimelineSummary s = Run(events, /*inline_compute=*/false);
  EXPECT_NEAR(s.network_seconds, 2.5, kTolerance);
  EXPECT_NEAR(s.hidden_network_seconds, 1.0, kTolerance);  // under step 1
  // Compute 0-2 s, the reduction 1-3 s, the update 3-4 s, the all-gather 4-4.5 s.
  EXPECT_NEAR(s.iteration_seconds, 4.5, kTolerance);
  EXPECT_NEAR(s.compute_wait_seconds, 1.0, kTolerance);
}

// Freeing a tensor whose copy is in flight waits for it (a release), unless
// the free is a drop's: dropped tensors are rebuilt, not copied back.
// Compaction moves blocks a copy in flight may still read or fill: the
// compute queue waits for the copies on the blocks it moves - here a 1 s
// offload of the tensor that moves, not the 2 s prefetch beside it on the
// other queue - and a GPU host does not block there.
TEST_F(HandMadeLogTest, CompactionWaitsOnTheComputeQueueForWhatItMoves) {
  using T = MemoryEventType;
  MemoryEvent compact = Event(T::kCompact, 1);
  compact.bytes = 500000000;  // 1 s at the move rate (half the memory bandwidth)
  const std::vector<MemoryEvent> events = {Event(T::kCompute, 0),
                                           Event(T::kBeginOffload, 0, t_, 1000000000),
                                           Event(T::kBeginPrefetch, 0, t_ + 1, 2000000000),
                                           Event(T::kMove, 1, t_, 1024),
                                           compact,
                                           Event(T::kCompute, 1)};
  for (bool inline_compute : {false, true}) {
    const TimelineSummary s = Run(events, inline_compute);
    EXPECT_NEAR(s.compute_wait_seconds, 1.0, kTolerance) << inline_compute;  // 1 s to 2 s
    EXPECT_NEAR(s.duplex_seconds, 1.0, kTolerance);  // the offload beside the prefetch
    EXPECT_NEAR(s.iteration_seconds, 1 + 1 + 1 + 1, kTolerance);
    // The CPU computes on the host thread; a GPU host goes on enqueueing.
    EXPECT_NEAR(s.host_wait_seconds, 0, kTolerance);
  }
  // Nothing moved that a copy touches: no wait at all.
  std::vector<MemoryEvent> unmoved = events;
  unmoved.erase(unmoved.begin() + 3);
  EXPECT_NEAR(Run(unmoved, false).compute_wait_seconds, 0, kTolerance);
}

TEST_F(HandMadeLogTest, ReleaseWaitsForCopyInFlightDropDoesNot) {
  using T = MemoryEventType;
  std::vector<MemoryEvent> events = {Event(T::kCompute, 0),
                                     Event(T::kBeginOffload, 0, t_, 2000000000),
                                     Event(T::kFree, 0, t_, 1024), Event(T::kCompute, 1)};
  EXPECT_NEAR(Run(events, false).iteration_seconds, 4.0, kTolerance);  // 1 + wait 2 + 1
  events.insert(events.begin() + 2, Event(T::kDrop, 0, t_, 1024));
  const TimelineSummary s = Run(events, false);
  EXPECT_NEAR(s.iteration_seconds, 3.0, kTolerance);  // the copy ends last, at 3
  EXPECT_NEAR(s.host_wait_seconds, 0, kTolerance);
}

// A streamed step's copies (0.5 s in, 1 s out in all) interleave with its
// slices. In one slice, or single-buffered in four, nothing overlaps: each
// slice comes in, computes and goes out before the next comes in (4.5 s).
// Double-buffered, slice k+1 comes in while slice k computes and slice k-1
// goes out. Over a link that carries one way at a time the step is bound by
// its 1.5 s of copies, the copy queue idle only while slice 0 computes
// before it can go out (1 + 1.625 + 1 = 3.625 s). Over a duplex link a slice
// in and a slice out run at once: 3.5 s when the tensor read is the one
// written (slice k+1 comes into the half that slice k-1 is still going out
// of, so it waits for that copy out), 3.375 s when they are two tensors.
TEST_F(HandMadeLogTest, StreamedStepOverlapsCopiesWhenDoubleBuffered) {
  using T = MemoryEventType;
  auto events = [&](int slices, int buffers, TensorId written) {
    MemoryEvent step = Event(T::kCompute, 1);
    step.slices = slices;
    step.buffers = buffers;
    return std::vector<MemoryEvent>{Event(T::kCompute, 0), Event(T::kStreamIn, 1, t_, 500000000),
                                    Event(T::kStreamOut, 1, written, 1000000000), step,
                                    Event(T::kCompute, 2)};
  };
  for (bool duplex : {false, true}) {
    profile_.link.duplex = duplex;
    for (bool inline_compute : {true, false}) {
      for (int slices : {1, 4}) {
        const TimelineSummary s = Run(events(slices, 1, t_), inline_compute);
        EXPECT_NEAR(s.iteration_seconds, 4.5, kTolerance) << inline_compute << " " << slices;
        EXPECT_NEAR(s.copy_seconds, 1.5, kTolerance);
        EXPECT_NEAR(s.overlap(), 0.0, kTolerance);
      }
      const TimelineSummary single = Run(events(4, 1, t_), inline_compute);
      const TimelineSummary doubled = Run(events(4, 2, t_), inline_compute);
      EXPECT_NEAR(doubled.to_device_seconds, 0.5, kTolerance);
      EXPECT_NEAR(doubled.to_host_seconds, 1.0, kTolerance);
      EXPECT_NEAR(doubled.copy_seconds, 1.5 - doubled.duplex_seconds, kTolerance);
      EXPECT_GT(doubled.overlap(), 0.0) << inline_compute;
      EXPECT_LT(doubled.iteration_seconds, single.iteration_seconds) << inline_compute;
      EXPECT_GE(doubled.iteration_seconds, 2 + 1 - kTolerance);  // the copies out bind the step
    }
  }
  profile_.link.duplex = false;
  const TimelineSummary simplex = Run(events(4, 2, t_), false);
  EXPECT_NEAR(simplex.iteration_seconds, 3.625, kTolerance);
  EXPECT_NEAR(simplex.duplex_seconds, 0, kTolerance);
  profile_.link.duplex = true;
  const TimelineSummary duplex = Run(events(4, 2, t_), false);
  EXPECT_NEAR(duplex.iteration_seconds, 3.5, kTolerance);
  EXPECT_NEAR(duplex.duplex_seconds, 0.125, kTolerance);
  EXPECT_NEAR(Run(events(4, 2, t_ + 1), false).iteration_seconds, 3.375, kTolerance);
}

// A recomputation costs its layer's forward; the update runs last.
TEST_F(HandMadeLogTest, RecomputationAndUpdateRunOnTheComputeQueue) {
  using T = MemoryEventType;
  MemoryEvent recompute = Event(T::kRecompute, 1);
  recompute.layer = 2;
  costs_.update_seconds = 0.25;
  const TimelineSummary s = Run({Event(T::kCompute, 0), recompute, Event(T::kCompute, 1)}, false);
  EXPECT_NEAR(s.iteration_seconds, 2.75, kTolerance);
  EXPECT_EQ(timeline_.slices[1].category, "recompute");
  EXPECT_EQ(timeline_.slices.back().category, "update");
}

// Mapping chunks (va): an unmap first waits for the compute queued before
// the free that gave its chunks back - here step 0's, ending at 1 s - not
// for the 2 s offload queued since (ending at 3 s) nor for later compute;
// then the host spends the profile's cost per chunk mapped or unmapped.
// Maps alone wait for nothing, nor does a free of an earlier iteration.
TEST_F(HandMadeLogTest, UnmapWaitsForTheComputeBeforeItsFreeAndMappingCostsHostTime) {
  using T = MemoryEventType;
  profile_.map_seconds_per_chunk = 0.1;
  MemoryEvent freed = Event(T::kFree, 0);
  freed.block = 7;
  MemoryEvent alloc = Event(T::kAlloc, 1, t_, 1024);
  alloc.maps = 2;
  alloc.unmaps = 1;
  alloc.fence = 7;
  std::vector<MemoryEvent> events = {
      Event(T::kCompute, 0), freed, Event(T::kBeginOffload, 0, 2, 2000000000),
      Event(T::kCompute, 1), alloc, Event(T::kCompute, 2)};
  TimelineSummary s = Run(events, /*inline_compute=*/false);
  EXPECT_NEAR(s.host_wait_seconds, 1.0, kTolerance);
  EXPECT_NEAR(s.map_seconds, 0.3, kTolerance);
  EXPECT_NEAR(s.iteration_seconds, 3.0, kTolerance);  // the copy and step 2 end together
  int waits = 0;
  for (const TimelineSlice& slice : timeline_.slices) {
    waits += slice.name == "wait for the compute before an unmap";
  }
  EXPECT_EQ(waits, 1);
  events[4].fence = -1;  // freed in an earlier iteration: long done
  s = Run(events, false);
  EXPECT_NEAR(s.host_wait_seconds, 0, kTolerance);
  EXPECT_NEAR(s.map_seconds, 0.3, kTolerance);
  events[4].fence = 7;
  events[4].unmaps = 0;
  s = Run(events, false);
  EXPECT_NEAR(s.host_wait_seconds, 0, kTolerance);
  EXPECT_NEAR(s.map_seconds, 0.2, kTolerance);
  EXPECT_NEAR(s.iteration_seconds, 3.0, kTolerance);
  // Between iterations (va restoring its ranges): the same rules.
  MemoryEvent remap = Event(T::kRemap, -1);
  remap.unmaps = 3;
  remap.fence = 7;
  s = Run({Event(T::kCompute, 0), freed, Event(T::kCompute, 1), remap}, false);
  EXPECT_NEAR(s.host_wait_seconds, 1.0, kTolerance);
  EXPECT_NEAR(s.map_seconds, 0.3, kTolerance);
}

// ---------------------------------------------------------------------------
// Real plans

struct PlanCase {
  const char* mode;
  bool tight;
};

class SimulatedPlanTest : public ::testing::TestWithParam<PlanCase> {};

// Replaying a plan: the memory curve peaks at the planner's peak and ends
// with no host copies; one compute slice per active step and per
// recomputation, one copy slice per transfer; the trace parses.
TEST_P(SimulatedPlanTest, TimelineMatchesThePlan) {
  auto net = Net::Build(testing::MustParse(testing::kResNet, {}), {4, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode(GetParam().mode, &options).ok());
  options.record_events = true;
  if (GetParam().tight) options.device_budget = *MinimumBudget(view, options, kPoolBlockBytes);
  auto plan = Plan(view, options);
  ASSERT_TRUE(plan.ok() && plan->fits);
  const DeviceProfile profile = *FindDeviceProfile("k40-pcie3");
  const IterationCosts costs = ModelCosts(view, plan->log, profile, nullptr);
  EXPECT_EQ(costs.Source(), "model");
  Timeline timeline = SimulateIteration(view, plan->events, costs, profile,
                                        BaseDeviceBytes(plan->log, plan->events));
  size_t peak = 0;
  for (const MemorySample& m : timeline.memory) {
    size_t total = 0;
    for (size_t b : m.device) total += b;
    peak = std::max(peak, total);
  }
  EXPECT_EQ(peak, plan->peak);
  EXPECT_EQ(timeline.memory.back().host, 0u);
  int active = 0, copies = 0;
  for (const Step& s : view.schedule->steps) active += s.active;
  for (const MemoryEvent& e : plan->events) {
    copies += (e.type == MemoryEventType::kBeginOffload && e.bytes > 0) ||
              e.type == MemoryEventType::kBeginPrefetch;
  }
  if (std::string(GetParam().mode) == "offload") {
    EXPECT_GT(copies, 0);
  }

  timeline.title = "resnet \"test\"";
  const testing::TraceContents trace = testing::ReadTrace(TimelineTraceJson(timeline));
  ASSERT_TRUE(trace.valid) << trace.error;
  EXPECT_EQ(trace.tracks.at(1), "compute queue");
  EXPECT_EQ(trace.tracks.at(2), "copy queue to device");
  EXPECT_EQ(trace.tracks.at(3), "copy queue to host");
  EXPECT_EQ(trace.Slices("compute queue", "forward") + trace.Slices("compute queue", "backward"),
            active);
  EXPECT_EQ(trace.Slices("compute queue", "recompute"), plan->recomputations);
  EXPECT_EQ(trace.Slices("compute queue", "update"), 1);
  EXPECT_EQ(trace.Slices("copy queue to host", "offload") +
                trace.Slices("copy queue to device", "prefetch"),
            copies);
  EXPECT_TRUE(trace.durations_valid);
  EXPECT_NEAR(trace.last_end_us, timeline.seconds * 1e6, 1.0);
  EXPECT_EQ(trace.counters.at(kDeviceMemoryCounter).count("activations"), 1u);
  EXPECT_EQ(trace.counters.at(kDeviceMemoryCounter).count("workspace"), 1u);
  EXPECT_EQ(trace.counters.at(kHostMemoryCounter).count("offloaded"), 1u);
  EXPECT_EQ(trace.other.value("title", ""), "resnet \"test\"");
  EXPECT_NEAR(trace.other.value("iteration_seconds", -1.0), timeline.seconds, 1e-6);
  const std::string svg = TimelineSvg(timeline);
  EXPECT_NE(svg.find("compute queue"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Modes, SimulatedPlanTest,
                         ::testing::Values(PlanCase{"liveness", false}, PlanCase{"offload", true},
                                           PlanCase{"offload_recompute", true},
                                           PlanCase{"superneurons", true}, PlanCase{"dymem", true},
                                           PlanCase{"vdnn", true}, PlanCase{"baseline", false}),
                         [](const auto& info) {
                           return std::string(info.param.mode) +
                                  (info.param.tight ? "_minimum" : "_roomy");
                         });

// vDNN's per-layer barrier (the dymem scheduler's `barrier`, on in the vdnn
// mode) makes the compute queue wait for each offload at the end of the step
// it overlapped: over a slow link the same copies cost compute waits that
// the barrier-free schedule does not have, and never make it faster.
TEST(SimulatedScheduleTest, TheBarrierMakesComputeWaitForOffloads) {
  auto net = Net::Build(testing::MustParse(testing::kResNet, {}), {4, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  DeviceProfile profile = *FindDeviceProfile("k40-pcie3");
  constexpr double kSlowLinkBytesPerSecond = 1e8;
  profile.link.d2h_bytes_per_second = profile.link.h2d_bytes_per_second = kSlowLinkBytesPerSecond;
  const auto simulate = [&](const char* mode, bool barrier) {
    MemoryOptions options;
    EXPECT_TRUE(ApplyMemoryMode(mode, &options).ok());
    // vDNN's offload set and schedule; the test network's feature maps are small.
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"offload_set", "conv"},
                                     {"release", "eager"},
                                     {"prefetch", "ahead"},
                                     {"barrier", barrier ? "true" : "false"},
                                     {"min_offload", "0"}}) {
      EXPECT_TRUE(options.settings.Set(key, value).ok()) << key;
    }
    options.record_events = true;
    auto plan = Plan(view, options);
    EXPECT_TRUE(plan.ok() && plan->fits);
    const IterationCosts costs = ModelCosts(view, plan->log, profile, nullptr);
    return Summarize(SimulateIteration(view, plan->events, costs, profile,
                                       BaseDeviceBytes(plan->log, plan->events)));
  };
  const TimelineSummary with = simulate("dymem", true), without = simulate("dymem", false);
  EXPECT_GT(without.copy_seconds, 0);
  EXPECT_NEAR(with.copy_seconds, without.copy_seconds, kTolerance);
  EXPECT_GT(with.compute_wait_seconds, without.compute_wait_seconds);
  EXPECT_GE(with.iteration_seconds, without.iteration_seconds - kTolerance);
  // The vdnn mode is that schedule with the barrier (placed by best fit).
  EXPECT_NEAR(simulate("vdnn", true).iteration_seconds, with.iteration_seconds, kTolerance);
}

// Under va the plan's events say what was mapped, and the simulator charges
// exactly that: at most one wait per event that unmaps, the profile's cost per
// chunk. Page-sized chunks make the window scheduler remap at its minimum.
TEST(SimulatedPlanTest, VirtualAddressingChargesEveryChunkMapped) {
  auto net = Net::Build(testing::MustParse(testing::kResNet, {}), {4, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("window", &options).ok());
  options.allocator = "va";
  ASSERT_TRUE(options.settings.Set("va_chunk", "4KiB").ok());
  options.record_events = true;
  // The smallest budget whose steady iteration maps or unmaps chunks: at
  // some budgets every range the iteration needs stays mapped from the last
  // (which budgets depends on the convolution algorithms this processor has).
  const size_t minimum = *MinimumBudget(view, options, kPoolBlockBytes);
  StatusOr<MemoryPlan> plan = Status(StatusCode::kInternal, "no budget tried");
  int64_t chunks = 0, unmapping = 0;
  for (size_t budget = minimum; budget <= 2 * minimum && chunks == 0; budget += kPoolBlockBytes) {
    options.device_budget = budget;
    plan = Plan(view, options);
    ASSERT_TRUE(plan.ok() && plan->fits) << budget;
    unmapping = 0;
    for (const MemoryEvent& e : plan->events) {
      chunks += e.maps + e.unmaps;
      unmapping += e.unmaps > 0;
    }
  }
  ASSERT_GT(chunks, 0);
  // An unmap's fence names a block whose free the plan logged before it.
  std::set<AllocationId> freed;
  int fenced = 0;
  for (const MemoryEvent& e : plan->events) {
    if (e.type == MemoryEventType::kFree) freed.insert(e.block);
    if (e.unmaps == 0 || e.fence < 0) continue;
    EXPECT_TRUE(freed.count(e.fence)) << "fence " << e.fence;
    fenced++;
  }
  EXPECT_GT(fenced, 0);
  DeviceProfile profile = *FindDeviceProfile("v100-nvlink2");
  const IterationCosts costs = ModelCosts(view, plan->log, profile, nullptr);
  const DeviceBytes base = BaseDeviceBytes(plan->log, plan->events);
  const Timeline free_maps = SimulateIteration(view, plan->events, costs, profile, base);
  profile.map_seconds_per_chunk = 1e-3;
  const Timeline timeline = SimulateIteration(view, plan->events, costs, profile, base);
  const TimelineSummary s = Summarize(timeline);
  EXPECT_NEAR(s.map_seconds, chunks * 1e-3, 1e-9);
  EXPECT_GT(timeline.seconds, free_maps.seconds);
  int unmap_waits = 0;
  for (const TimelineSlice& slice : timeline.slices) {
    unmap_waits += slice.name == "wait for the compute before an unmap";
  }
  EXPECT_LE(unmap_waits, unmapping);  // a wait for compute already done takes no time
  EXPECT_NE(MemoryEventsJson(plan->events, *view.schedule).find("\"maps\":"), std::string::npos);
}

// Measured step times stand for the steps they timed; a step measured under
// other algorithms is adjusted by the candidates' timed difference.
TEST(CostModelTest, MeasuredTimesWinAndOtherAlgorithmsAreAdjusted) {
  auto net = Net::Build(testing::MustParse(testing::kLeNet), {2, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const NetworkView view = (*net)->view();
  MemoryOptions options;
  options.record_events = true;
  auto plan = Plan(view, options);
  ASSERT_TRUE(plan.ok());
  const DeviceProfile profile = *FindDeviceProfile("titanx-pcie3");
  const int conv1 = (*net)->FindLayer("conv1");
  const int step = view.schedule->forward_step[conv1];
  const std::string chosen = plan->log.steps[step].algorithm;
  ASSERT_FALSE(chosen.empty());
  StepTimes times;
  times.Add("conv1", Pass::kForward, chosen, 0.125);
  times.AddUpdate(0.5);
  IterationCosts costs = ModelCosts(view, plan->log, profile, &times);
  EXPECT_EQ(costs.step_seconds[step], 0.125);
  EXPECT_EQ(costs.recompute_seconds[conv1], 0.125);
  EXPECT_EQ(costs.update_seconds, 0.5);
  EXPECT_EQ(costs.measured, 1);
  EXPECT_GT(costs.modelled, 0);
  // Measured under another algorithm: adjusted by the candidates' times.
  const auto candidates = view.algorithms->Candidates(conv1, Pass::kForward, 0, view.batch);
  ASSERT_GT(candidates.size(), 1u);
  const auto other = std::find_if(candidates.begin(), candidates.end(),
                                  [&](const auto& c) { return c.name != chosen; });
  const auto mine = std::find_if(candidates.begin(), candidates.end(),
                                 [&](const auto& c) { return c.name == chosen; });
  StepTimes elsewhere;
  elsewhere.Add("conv1", Pass::kForward, other->name, 0.125 + other->seconds);
  costs = ModelCosts(view, plan->log, profile, &elsewhere);
  EXPECT_NEAR(costs.step_seconds[step], 0.125 + mine->seconds, 1e-12);
}

// ---------------------------------------------------------------------------
// Real runs

// A traced run over a throttled link has what its plan has: one compute
// slice per active step and per recomputation, one copy slice per transfer
// (named after its tensor), and memory that peaks where the plan says.
TEST(TracedRunTest, RealTimelineMatchesThePlan) {
  const NetSpec spec = testing::MustParse(testing::kResNet);
  auto net = Net::Build(spec, {4, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  SolverConfig sgd;
  sgd.momentum = 0.9;
  auto solver = Solver::Create(sgd);
  (*solver)->AddState(**net);
  MemoryOptions options;
  ASSERT_TRUE(ApplyMemoryMode("offload_recompute", &options).ok());
  options.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  options.record_events = true;
  options.device_budget = *MinimumBudget((*net)->view(), options, kPoolBlockBytes);
  auto plan = Plan((*net)->view(), options);
  ASSERT_TRUE(plan.ok() && plan->fits);
  int active = 0, copies = 0;
  for (const Step& s : (*net)->schedule().steps) active += s.active;
  for (const MemoryEvent& e : plan->events) {
    copies += (e.type == MemoryEventType::kBeginOffload && e.bytes > 0) ||
              e.type == MemoryEventType::kBeginPrefetch;
  }
  ASSERT_GT(copies, 0);
  CpuDevice device(CpuDeviceOptions{2e8});
  auto run = MeasureRun(spec, 4, device, options, 1);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const testing::TraceContents trace = testing::ReadTrace(TimelineTraceJson(run->last));
  ASSERT_TRUE(trace.valid) << trace.error;
  EXPECT_EQ(trace.Slices("compute queue", "forward") + trace.Slices("compute queue", "backward"),
            active);
  EXPECT_EQ(trace.Slices("compute queue", "recompute"), plan->recomputations);
  EXPECT_EQ(trace.Slices("copy queue to host", "offload") +
                trace.Slices("copy queue to device", "prefetch"),
            copies);
  EXPECT_EQ(trace.Slices("copy queue to host", "prefetch") +
                trace.Slices("copy queue to device", "offload"),
            0);
  for (const TimelineSlice& slice : run->last.slices) {
    if (IsCopyLane(slice.lane)) {
      EXPECT_NE(slice.name.back(), ' ') << "an unnamed copy";
    }
  }
  size_t peak = 0;
  for (const MemorySample& m : run->last.memory) {
    size_t total = 0;
    for (size_t b : m.device) total += b;
    peak = std::max(peak, total);
  }
  EXPECT_EQ(peak, plan->peak);
  EXPECT_GE(run->steps.size(), static_cast<size_t>(active) / 2);
  EXPECT_GE(run->steps.update_seconds(), 0);
  EXPECT_GE(run->steps.host_step_seconds(), 0);
}

}  // namespace
}  // namespace spill
