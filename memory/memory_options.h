// Memory settings: the device budget and which techniques are on.
//
// Modes are presets of independent techniques, and each technique can also be
// switched on its own (YAML `memory:` or flags), so comparing policies never
// needs a rebuild:
//   baseline      every tensor has its own block for the whole iteration
//   liveness      tensors are freed after their last reader (SuperNeurons §3.2)
//   offload       liveness + checkpoint outputs offloaded to host, prefetched
//   recompute     liveness + cheap layers' outputs dropped and recomputed
//   offload_recompute  liveness + offload + recompute, both on a schedule
//   superneurons  liveness + offload + recompute + the LRU tensor cache, which
//                 makes offloading and dropping lazy: nothing moves while
//                 memory suffices
//   window        liveness + any transient tensor swapped to host and back by
//                 the window scheduler (a byte window over the iteration's
//                 tensor sequence under a device budget)
//   lms           liveness + swaps at fixed step distances (the LMS-like
//                 baseline of the window scheduler)
//   dymem         liveness + Dymem's offload set with lazy release and its
//                 backward prefetch search (Algorithm 2), no barrier between
//                 the queues; the GTBM allocator, no compaction
//   vdnn          the vDNN-like baseline: convolution inputs offloaded, every
//                 copy waited for at the end of its step, prefetch one layer
//                 ahead; best fit, no compaction
//   dqn, greedy, milp  a plan searched for under memory.planner.limit: a deep
//                 Q-network, the cheapest move per byte at the peak, or the
//                 exact mixed-integer program (memory/planners/)
//   memonger      every output dropped but each sqrt(N)-th layer's, segments
//                 rerun in backward (memory/planners/memonger.cc)
#ifndef SPILL_MEMORY_MEMORY_OPTIONS_H_
#define SPILL_MEMORY_MEMORY_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "framework/status.h"
#include "framework/units.h"
#include "memory/allocators/allocator.h"
#include "memory/heap_pool.h"
#include "memory/planners/planner_settings.h"
#include "memory/recompute_policy.h"
#include "memory/workspace_selector.h"

namespace spill {

// A budget for planning without a limit: large enough for any network here.
constexpr size_t kUnlimitedBudget = size_t{1} << 50;  // 1 PiB of address arithmetic
constexpr size_t kDefaultDeviceBudget = 8 * kGiB;
constexpr size_t kDefaultHostBudget = 32 * kGiB;

// Where parameters, their gradients and the solver state live between uses.
struct ParamPlacement {
  enum class Kind {
    kDevice,  // on the device for good (SuperNeurons)
    kHost,    // in host memory, brought in for each step that uses them
    kAbove,   // in host memory when at least `above` bytes, on the device otherwise
    kCache,   // on the device while they fit; the tensor cache evicts them like activations
  };
  Kind kind = Kind::kDevice;
  size_t above = 0;

  std::string ToString() const;
  bool HomeOnHost(size_t bytes) const {
    return kind == Kind::kHost || (kind == Kind::kAbove && bytes >= above);
  }
};
// "device", "host", "above:SIZE" or "cache".
StatusOr<ParamPlacement> ParseParamPlacement(const std::string& text);

// A size given in bytes or as a multiple of a base the user does not have to
// work out: "2GiB" or "1.5x".
struct SizeSetting {
  double factor = 1.0;  // used when bytes == 0
  size_t bytes = 0;

  size_t Of(size_t base) const;
  std::string ToString() const;
};
// "1.5x" (a positive multiple) or a byte size ("8GiB").
StatusOr<SizeSetting> ParseSizeSetting(const std::string& text);

// Batch chunking (`memory.chunk`): images per slice of the batch a step
// computes at a time. Off: the whole batch at once; auto: the planner
// chooses the largest slice that fits (off when the whole batch fits).
constexpr int64_t kBatchChunkOff = 0;
constexpr int64_t kBatchChunkAuto = -1;
constexpr int64_t kMaxBatchChunk = int64_t{1} << 20;
// "off", "auto" or a count of images; a byte size is an error that names
// memory.va_chunk.
StatusOr<int64_t> ParseBatchChunk(const std::string& text);
std::string BatchChunkName(int64_t chunk);

// The virtual-addressing allocator's default physical chunk: the CUDA
// driver's usual mapping granularity.
constexpr size_t kDefaultChunkBytes = 2 * kMiB;
// Chunks are mapped with mmap on the CPU: whole pages.
constexpr size_t kChunkAlignmentBytes = 4 * kKiB;

struct MemoryOptions {
  std::string mode = "liveness";
  size_t device_budget = kDefaultDeviceBudget;
  size_t host_budget = kDefaultHostBudget;
  // How device requests are placed (memory/allocators/): first_fit,
  // best_fit, static, ... by registered name.
  std::string allocator = "first_fit";
  // Which tensor the tensor cache evicts first (memory/eviction/): lru, belady.
  std::string eviction = "lru";
  // Who plans the transfers around each step (memory/schedulers/).
  std::string scheduler = "superneurons";
  // Where persistent state lives, where the solver updates what lives in
  // host memory (false: on the device, true: in host memory, as soon as a
  // layer's gradient has arrived), and what backs host memory: RAM, or a
  // file in a directory ("file:DIR") so it can exceed RAM.
  ParamPlacement params;
  bool update_on_host = false;
  std::string host_tier = "ram";

  bool liveness = true;
  bool offload = false;
  bool cache = false;
  bool recompute = false;

  // Offloaded tensors are prefetched this many checkpoint layers ahead.
  int prefetch_ahead = 1;
  RecomputeStrategy recompute_strategy = RecomputeStrategy::kCostAware;
  // When an allocation fails for want of a hole though enough bytes are
  // free, slide live tensors down to close the holes.
  bool compact = true;
  // How each step's algorithms and workspace are chosen.
  WorkspacePolicy workspace;

  // The window scheduler (memory/schedulers/window.h): the device bytes its
  // transfers may fill - a multiple of device budget - persistent tensors -
  // the largest workspace a step needs, or bytes - and how far it looks
  // ahead, in bytes of distinct tensors: a multiple of that budget or bytes.
  SizeSetting window_budget{1.0, 0};
  SizeSetting window{1.5, 0};
  // The LMS-like scheduler: a tensor leaves the device after a use when its
  // next use is at least `lms_threshold` steps away, and comes back
  // `lms_ahead` steps before that use.
  int lms_threshold = 4;
  int lms_ahead = 2;
  // At most this many tensors swap (0: every one the distances allow), the
  // largest or the earliest written first: TFLMS's n_tensors.
  int lms_count = 0;
  std::string lms_order = "largest";
  // The planners that search over plans (memory/planners/).
  PlannerSettings planner;
  // The virtual-addressing allocator (`va`): physical memory in chunks of
  // this size, mapped into a fresh virtual range per request.
  size_t va_chunk = kDefaultChunkBytes;
  // Images per slice of the batch (kBatchChunkOff, kBatchChunkAuto or a
  // count): every step computes slice by slice, bit for bit the whole
  // batch's results.
  int64_t batch_chunk = kBatchChunkOff;
  // Record every live tensor at every step (for memory logs).
  bool record_live = false;
  // Fill freed device blocks with NaN so a read after free cannot go unnoticed.
  bool poison_freed = false;
  // Check the allocator's invariants after every allocation and free (tests).
  bool check_allocator = false;
  // Keep the event log of the last iteration (allocation trace, transfers,
  // compute), for `plan --trace`, profile-guided allocators and simulation.
  bool record_events = false;

  // The dymem scheduler's switches (memory/schedulers/dymem.cc):
  // Tensors smaller than this are neither offloaded nor placed by mobility
  // (GTBM's reclaimed class).
  size_t min_offload_bytes = kDefaultMinOffloadBytes;
  // What is offloaded: "dymem" (every large feature map backward needs, but
  // fully connected, softmax and dropout outputs) or "conv" (the inputs of
  // convolutions, as vDNN).
  std::string offload_set = "dymem";
  // When an offloaded tensor gives its device block back: "lazy" (when an
  // allocation does not fit, oldest first, or at the end of forward) or
  // "eager" (after its last forward use).
  std::string release = "lazy";
  // How offloaded tensors come back: "dymem" (Algorithm 2: everything up to
  // the second convolution ahead, when it fits) or "ahead" (one layer ahead
  // of first use, as vDNN).
  std::string prefetch = "dymem";
  // Wait for every copy at the end of the step it overlapped (vDNN's
  // per-layer barrier).
  bool barrier = false;

  std::string Describe() const;
  // The techniques build on liveness; the budgets must hold a block; the
  // allocator, eviction rule and scheduler must be registered.
  Status Validate() const;
};

std::vector<std::string> MemoryModeNames();
// Sets the technique switches for a named mode.
Status ApplyMemoryMode(const std::string& mode, MemoryOptions* options);

}  // namespace spill

#endif  // SPILL_MEMORY_MEMORY_OPTIONS_H_
