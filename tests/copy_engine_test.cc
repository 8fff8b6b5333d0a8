// The copy engines (the CPU device's two copy queues and their events) and the
// residency state machine under real asynchrony: copies run on their own
// thread, throttled to a slow link so that they are still in flight when
// the runtime reaches the points where it must wait for them. Run under
// ThreadSanitizer by tools/ci/tsan.sh.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

#include "framework/device/cpu_device.h"
#include "framework/graph/net.h"
#include "memory/backing.h"
#include "memory/heap_pool.h"
#include "memory/planning/planner.h"
#include "memory/residency.h"
#include "memory/workspace_selector.h"
#include "tests/testing/net_harness.h"

namespace spill {
namespace {

TEST(CopyQueueTest, TasksRunInOrderAndEventsCompleteInOrder) {
  CpuWorkerQueue queue;
  std::vector<int> order;
  std::mutex mutex;
  std::vector<std::shared_ptr<Event>> events;
  for (int i = 0; i < 50; ++i) {
    queue.Enqueue([&, i] {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      std::lock_guard<std::mutex> lock(mutex);
      order.push_back(i);
    });
    events.push_back(queue.Record());
  }
  events[25]->Synchronize();
  {
    std::lock_guard<std::mutex> lock(mutex);
    ASSERT_GE(order.size(), 26u);
  }
  queue.Synchronize();
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
  for (auto& e : events) EXPECT_TRUE(e->IsComplete());
}

TEST(CopyQueueTest, WaitDefersLaterWorkUntilTheEvent) {
  CpuWorkerQueue producer, consumer;
  std::atomic<int> value{0};
  producer.Enqueue([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    value = 1;
  });
  consumer.Wait(producer.Record());
  int seen = -1;
  consumer.Enqueue([&] { seen = value.load(); });
  consumer.Synchronize();
  EXPECT_EQ(seen, 1);
}

// CopyAsync returns at once: a copy held behind a gate on another queue
// has not run when the call returns, and runs - throttled to bytes / rate,
// by the device's own record of it - once the gate opens. (Nothing here
// reads a clock: the order of events is what is checked.)
TEST(CopyQueueTest, ThrottledCopiesOverlapHostWork) {
  constexpr double kRate = 2e8;  // 0.2 GB/s: 4 MB take 20 ms
  CpuDevice device(CpuDeviceOptions{kRate});
  device.set_record_copies(true);
  std::vector<float> src(1 << 20, 3.0f), dst(1 << 20, 0.0f);
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  CpuWorkerQueue gate;  // a queue of its own: the test thread must not block
  gate.Enqueue([opened] { opened.wait(); });
  device.host_to_device_queue().Wait(gate.Record());
  device.CopyAsync(dst.data(), src.data(), src.size() * 4, CopyKind::kHostToDevice,
                   device.host_to_device_queue());
  auto event = device.host_to_device_queue().Record();
  EXPECT_FALSE(event->IsComplete());  // returned before the copy could start
  EXPECT_EQ(dst[12345], 0.0f);
  open.set_value();
  event->Synchronize();
  EXPECT_EQ(dst[12345], 3.0f);
  EXPECT_EQ(device.bytes_copied(CopyKind::kHostToDevice), src.size() * 4);
  const std::vector<CopySpan> spans = device.TakeCopySpans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_GE(spans[0].end - spans[0].begin, src.size() * 4 / kRate);  // load only lengthens it
}

// The two directions have a queue each, as a GPU has a copy engine each way:
// a copy to the host held behind a gate does not hold up a copy to the
// device enqueued after it, which completes while the gate is still shut;
// an event of one queue orders the other only where it is waited for.
TEST(CopyQueueTest, EachDirectionHasAQueueOfItsOwn) {
  CpuDevice device;
  std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 2.0f), out(1 << 16, 0.0f), in(1 << 16, 0.0f);
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  CpuWorkerQueue gate;
  gate.Enqueue([opened] { opened.wait(); });
  Queue& to_host = device.device_to_host_queue();
  Queue& to_device = device.host_to_device_queue();
  ASSERT_NE(&to_host, &to_device);
  to_host.Wait(gate.Record());
  device.CopyAsync(out.data(), a.data(), a.size() * 4, CopyKind::kDeviceToHost, to_host);
  std::shared_ptr<Event> offloaded = to_host.Record();
  device.CopyAsync(in.data(), b.data(), b.size() * 4, CopyKind::kHostToDevice, to_device);
  to_device.Record()->Synchronize();  // would hang with one queue for both
  EXPECT_EQ(in[777], 2.0f);
  EXPECT_FALSE(offloaded->IsComplete());
  EXPECT_EQ(out[777], 0.0f);
  // A copy in of what the copy out writes waits for its event.
  std::vector<float> back(1 << 16, 0.0f);
  to_device.Wait(offloaded);
  device.CopyAsync(back.data(), out.data(), out.size() * 4, CopyKind::kHostToDevice, to_device);
  std::shared_ptr<Event> fetched = to_device.Record();
  EXPECT_FALSE(fetched->IsComplete());
  open.set_value();
  fetched->Synchronize();
  EXPECT_TRUE(offloaded->IsComplete());
  EXPECT_EQ(back[777], 1.0f);
  device.SynchronizeCopies();
}

double ProcessCpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// The throttle paces a copy to bytes / rate by sleeping: the copy takes that
// long by the device's record, and the process burns little CPU meanwhile (a
// spinning throttle would burn a core for the whole copy). Other load on the
// machine can only lengthen the copy, never add to this process's CPU time.
TEST(CopyQueueTest, ThrottleSleepsRatherThanSpins) {
  constexpr double kRate = 5e7;  // 50 MB/s: 4 MB take 80 ms
  CpuDevice device(CpuDeviceOptions{kRate});
  device.set_record_copies(true);
  std::vector<float> src(1 << 20, 1.0f), dst(1 << 20, 0.0f);
  const double cpu_before = ProcessCpuSeconds();
  device.CopyAsync(dst.data(), src.data(), src.size() * 4, CopyKind::kDeviceToHost,
                   device.device_to_host_queue());
  device.device_to_host_queue().Synchronize();
  const double cpu = ProcessCpuSeconds() - cpu_before;
  const std::vector<CopySpan> spans = device.TakeCopySpans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].bytes, src.size() * 4);
  EXPECT_EQ(spans[0].kind, CopyKind::kDeviceToHost);
  const double copy_seconds = spans[0].end - spans[0].begin;
  EXPECT_GE(copy_seconds, src.size() * 4 / kRate);
  EXPECT_LT(cpu, 0.25 * copy_seconds)
      << "the throttle burnt " << cpu << " s of CPU in a copy of " << copy_seconds << " s";
  EXPECT_TRUE(device.TakeCopySpans().empty());
}

// Offload, drop the device block, prefetch back: the bytes survive, and the
// device block is not reused before the copy out has read it.
TEST(ResidencyTest, RoundTripThroughHostMemoryKeepsTheBytes) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [4, 32, 32]}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)"),
                        {8, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  const TensorId data = s.layers[0].outputs[0];
  const size_t bytes = s.tensors[data].bytes;
  CpuDevice device(CpuDeviceOptions{5e8});
  auto created = CreateAllocator("first_fit", {4 * bytes, {}});
  ASSERT_TRUE(created.ok());
  std::unique_ptr<DeviceAllocator> device_pool = std::move(*created);
  HeapPool host_pool(4 * bytes);
  // The regions go with the backing, before the pool and the device.
  std::unique_ptr<Backing> backing = MakeDeviceBacking(device);
  ASSERT_TRUE(backing->Reserve(*device_pool, host_pool.capacity(), "ram").ok());
  char* device_base = backing->device_address(0);
  ResidencyManager r(s, device_pool.get(), &host_pool, backing.get(), nullptr);
  r.set_poison(true);
  ASSERT_TRUE(r.Allocate(data).ok());
  float* p = r.data(data);
  for (size_t i = 0; i < bytes / 4; ++i) p[i] = static_cast<float>(i % 977);
  ASSERT_TRUE(r.BeginOffload(data).ok());
  EXPECT_EQ(r.state(data), Residency::kOffloading);
  r.FinishOffload(data);  // waits for the copy, then frees (and poisons) the block
  EXPECT_EQ(r.state(data), Residency::kHost);
  EXPECT_EQ(device_pool->stats().total_in_use, 0u);
  // Something else takes the freed block meanwhile.
  AllocRequest request;
  request.bytes = bytes;
  auto other = device_pool->Allocate(request);
  ASSERT_TRUE(other.ok());
  std::memset(device_base + other->offset, 0x7F, bytes);
  ASSERT_TRUE(r.BeginPrefetch(data).ok());
  r.FinishPrefetch(data);
  const float* back = r.data(data);
  for (size_t i = 0; i < bytes / 4; ++i) ASSERT_EQ(back[i], static_cast<float>(i % 977)) << i;
  EXPECT_EQ(r.counters().to_host_bytes, bytes);
  EXPECT_EQ(r.counters().to_device_bytes, bytes);
  // The host copy is still current: offloading again moves nothing.
  ASSERT_TRUE(r.BeginOffload(data).ok());
  r.FinishOffload(data);
  EXPECT_EQ(r.counters().to_host_bytes, bytes);
  r.Release(data);
  EXPECT_EQ(host_pool.stats().total_in_use, 0u);
}

// The tensors a compaction moved, from the event log.
std::vector<TensorId> Moved(const MemoryEventLog& log) {
  std::vector<TensorId> moved;
  for (const MemoryEvent& e : log.events()) {
    if (e.type == MemoryEventType::kMove) moved.push_back(e.tensor);
  }
  return moved;
}

// Compaction slides blocks from the lowest only until a hole holds the
// request, leaves a block whose copy is in flight where it is when others
// can make the hole, and closes every hole when one holds the request
// already (the caller needs several blocks).
TEST(ResidencyTest, CompactionMovesOnlyWhatTheRequestNeedsAndCopiesLast) {
  auto net = Net::Build(testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [4, 32, 32]}
  - {name: a, type: relu}
  - {name: b, type: relu}
  - {name: c, type: relu}
  - {name: d, type: relu}
  - {name: fc, type: fully_connected, outputs: 3}
  - {name: loss, type: softmax_loss}
)"),
                        {8, DeviceType::kCpu});
  ASSERT_TRUE(net.ok());
  const Schedule& s = (*net)->schedule();
  std::vector<TensorId> t;  // five tensors of one size
  for (int layer = 0; layer < 5; ++layer) t.push_back(s.layers[layer].outputs[0]);
  const size_t bytes = s.tensors[t[0]].bytes;
  for (TensorId id : t) ASSERT_EQ(s.tensors[id].bytes, bytes);
  for (bool copying : {false, true}) {
    SCOPED_TRACE(copying ? "t1 offloading" : "nothing in flight");
    auto created = CreateAllocator("first_fit", {6 * bytes, {}});
    ASSERT_TRUE(created.ok());
    std::unique_ptr<DeviceAllocator> pool = std::move(*created);
    HeapPool host_pool(6 * bytes);
    std::unique_ptr<Backing> backing = MakePlanningBacking();
    ASSERT_TRUE(backing->Reserve(*pool, host_pool.capacity(), "ram").ok());
    MemoryEventLog log;
    pool->set_event_log(&log);
    ResidencyManager r(s, pool.get(), &host_pool, backing.get(), &log);
    for (TensorId id : t) ASSERT_TRUE(r.Allocate(id).ok());
    if (copying) {
      ASSERT_TRUE(r.BeginOffload(t[1]).ok());
    }
    r.Release(t[0]);
    r.Release(t[2]);  // [hole, t1, hole, t3, t4, free]
    ASSERT_FALSE(pool->CanAllocate(2 * bytes));
    EXPECT_EQ(r.Compact(2 * bytes), bytes);
    EXPECT_TRUE(pool->CanAllocate(2 * bytes));
    // t1 slides down; while its copy is in flight t3 takes the lowest hole
    // instead. t4 stays either way.
    EXPECT_EQ(Moved(log), std::vector<TensorId>{copying ? t[3] : t[1]});
    // A hole holds one block already: every hole closes. Without a copy in
    // flight [t1, hole, hole, t3, t4, free]: t3 and t4 slide; with one
    // [t3, t1, hole, hole, t4, free]: t4 alone.
    log.Clear();
    const std::vector<TensorId> rest =
        copying ? std::vector<TensorId>{t[4]} : std::vector<TensorId>{t[3], t[4]};
    EXPECT_EQ(r.Compact(bytes), rest.size() * bytes);
    EXPECT_EQ(Moved(log), rest);
    EXPECT_EQ(pool->stats().free_segments, 1u);
    if (copying) r.FinishOffload(t[1]);
  }
}

// Training with the tensor cache under a tight budget while every copy
// crawls over a slow link: the runtime's waits, not luck, keep the results
// bit-identical.
TEST(ResidencyTest, SlowLinkTrainingMatchesTheBaseline) {
  NetSpec spec = testing::MustParse(R"(
layers:
  - {name: data, type: input, shape: [3, 16, 16]}
  - {name: conv1, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: conv2, type: convolution, filters: 8, kernel: 3, pad: 1}
  - {name: add, type: add, inputs: [conv2, relu1]}
  - {name: pool, type: max_pool, kernel: 2}
  - {name: fc, type: fully_connected, outputs: 4}
  - {name: loss, type: softmax_loss}
)");
  testing::SyntheticRun run;
  run.batch = 4;
  run.steps = 2;
  run.memory.workspace = *ParseWorkspacePolicy("pin:im2col_image");
  run.memory.host_budget = 16 << 20;  // locked as used on a GPU; this network uses far less
  ASSERT_TRUE(ApplyMemoryMode("baseline", &run.memory).ok());
  auto baseline = testing::TrainSynthetic(spec, run);
  ASSERT_TRUE(baseline.ok());
  for (const char* mode : {"offload", "offload_recompute", "superneurons"}) {
    ASSERT_TRUE(ApplyMemoryMode(mode, &run.memory).ok());
    auto net = testing::BuildTrainingNet(spec, run.batch);
    ASSERT_TRUE(net.ok());
    run.memory.device_budget = *MinimumBudget((*net)->view(), run.memory, kPoolBlockBytes);
    run.memory.poison_freed = true;
    run.link_bytes_per_second = 2e7;  // 20 MB/s
    auto slow = testing::TrainSynthetic(spec, run);
    ASSERT_TRUE(slow.ok()) << mode << ": " << slow.status().ToString();
    EXPECT_EQ(slow->losses, baseline->losses) << mode;
    EXPECT_GT(slow->to_host, 0u) << mode;
  }
}

}  // namespace
}  // namespace spill
