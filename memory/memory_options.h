// Memory settings: the device budget, which techniques are on, which
// policies run them, and the policies' own settings.
//
// Modes are presets of independent techniques, listed once in MemoryModes()
// (memory_options.cc) with what each turns on; each technique can also be
// switched on its own (YAML `memory:` or flags), so comparing policies never
// needs a rebuild.
//
// The keys of the `memory:` section come from one schema: MemoryKeys() for
// the settings every policy shares (budgets, switches, which policy runs
// each seam), and the settings each allocator and scheduler registers next
// to its code (memory/settings.h), kept in MemoryOptions::settings. The
// YAML reader, the flags, Validate, Describe and --help are made from it.
// A key given (in a config or as a flag) that the chosen mode and policies
// do not read is an error naming the mode.
#ifndef SPILL_MEMORY_MEMORY_OPTIONS_H_
#define SPILL_MEMORY_MEMORY_OPTIONS_H_

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/base/units.h"
#include "memory/allocators/allocator.h"
#include "memory/heap_pool.h"
#include "memory/recompute_policy.h"
#include "memory/settings.h"
#include "memory/workspace_selector.h"

namespace spill {

struct DeviceProfile;

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

// memory.host_tier: "ram" or "file:DIRECTORY".
Status CheckHostTier(const std::string& tier);
// memory.stream_buffers: 1 or 2.
Status CheckStreamBuffers(int64_t buffers);

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
  // The solver step waits for the end of the iteration (fp16's loss scaling
  // checks every gradient before any parameter changes; run.precision sets
  // it, not a key): parameters in host memory keep their gradients there
  // and are updated after backward instead of during it.
  bool updates_after_iteration = false;
  std::string host_tier = "ram";

  bool liveness = true;
  bool offload = false;
  bool cache = false;
  bool recompute = false;

  // When an allocation fails for want of a hole though enough bytes are
  // free, slide live tensors down to close the holes.
  bool compact = true;
  // How each step's algorithms and workspace are chosen.
  WorkspacePolicy workspace;
  // Images per slice of the batch (kBatchChunkOff, kBatchChunkAuto or a
  // count): every step computes slice by slice, bit for bit the whole
  // batch's results.
  int64_t batch_chunk = kBatchChunkOff;
  // Slices per staging block of a streamed step: 2 copies the next slice in
  // (and the previous out) while one computes; 1 alternates copy and compute.
  int stream_buffers = 2;
  // The chosen policies' own settings (memory/settings.h): the values
  // given; a policy reads its keys with their defaults.
  PolicySettings settings;
  // Keys given by the user, and where ("--release", "run.yaml:7:
  // memory.release"): each must be read by the chosen mode and policies.
  std::map<std::string, std::string> given;
  // This machine's measured profile ("cpu"), where the program calibrated
  // it: what planners time their plans on under memory.planner.profile: cpu
  // (spec-sheet profiles are found by name).
  std::shared_ptr<const DeviceProfile> measured_profile;

  // Record every live tensor at every step (for memory logs).
  bool record_live = false;
  // Fill freed device blocks with NaN so a read after free cannot go unnoticed.
  bool poison_freed = false;
  // Check the allocator's invariants after every allocation and free (tests).
  bool check_allocator = false;
  // Keep the event log of the last iteration (allocation trace, transfers,
  // compute), for `plan --trace`, profile-guided allocators and simulation.
  bool record_events = false;
  // Each trainable parameter's gradient leaves the device after its layer's
  // backward step (data parallelism copies it out for reduction there; the
  // solver reads the reduced gradient) and is made again for the update
  // (distributed.zero 2). Parameters on the device only.
  bool gradients_leave = false;
  // Each rank keeps its piece of every trainable parameter alone
  // (ParameterSlot::master, distributed.zero 3): a parameter is gathered
  // from every rank's piece before each step that reads it (by the source
  // set with MemoryRuntime::set_parameter_source; planning only makes room)
  // and released after. Needs gradients_leave.
  bool params_gathered = false;
  // Data-parallel processes (what a gather receives: (ranks - 1) / ranks
  // of the parameter, in its memory events).
  int ranks = 1;

  std::string Describe() const;
  // The techniques build on liveness; the budgets must hold a block; the
  // allocator, eviction rule and scheduler must be registered. (That every
  // key given is read is checked where input is read: CheckKeysRead.)
  Status Validate() const;
};

// A mode: a preset of the technique switches, the scheduler, and for modes
// that come with their own placement the allocator and compaction.
struct MemoryMode {
  const char* name;
  const char* summary;  // one line, for --help
  bool liveness, offload, cache, recompute;
  const char* scheduler;
  const char* allocator;  // nullptr: keep the one chosen
  bool compact;
  // It searches for its plan under memory.planner.limit (memory/planners/).
  bool searches = false;
  // It trains, solves or searches for seconds to minutes: tools that compare
  // every mode (plan)
  // plan it only when it is named, and what plans it at many budgets (tests,
  // searches for a minimum) gives it its quick settings or leaves it out.
  bool costly = false;
};
// Every mode, in the order tools list them.
const std::vector<MemoryMode>& MemoryModes();
std::vector<std::string> MemoryModeNames();
// The mode of that name, or null.
const MemoryMode* FindMemoryMode(const std::string& name);
// Sets the technique switches for a named mode.
Status ApplyMemoryMode(const std::string& mode, MemoryOptions* options);

// One key of the memory: section that every policy shares: its spec (key,
// kind, default, help, flag) and how its text sets MemoryOptions.
struct MemoryKey {
  SettingSpec spec;
  std::function<Status(const std::string& text, MemoryOptions* options)> apply;
  // Whether options read the key (null: always): memory.eviction only
  // matters with the tensor cache.
  std::function<bool(const MemoryOptions& options)> read;
};
// The shared keys, in the order they are applied (mode first: it resets
// the switches, the scheduler, the allocator and compaction).
const std::vector<MemoryKey>& MemoryKeys();
// Sets `key` - a shared key or a registered policy setting - from `text`
// and records that it was given at `where`; an error says what is expected
// (the caller names the key or flag).
Status SetMemoryKey(const std::string& key, const std::string& text, const std::string& where,
                    MemoryOptions* options);
// Whether `key` names a shared key or a registered policy setting.
bool IsMemoryKey(const std::string& key);
// Every key in options.given is read by the chosen mode and policies; the
// error names where the key was given and the mode. The YAML reader and the
// flags check it once the mode is final; options derived inside a tool
// (another mode to compare with) are not user input and are not checked.
Status CheckKeysRead(const MemoryOptions& options);
// Whether the chosen mode and policies read `key` (a shared key or a
// registered policy setting): tests and tools set a setting only where it
// is read.
bool ReadsKey(const MemoryOptions& options, const std::string& key);
// " (window_budget 0.8x)": the settings of the `seam` policy `name` whose
// values differ from their defaults, or `every` one (empty when none are).
std::string DescribeSettings(const MemoryOptions& options, const std::string& seam,
                             const std::string& name, bool every = false);

}  // namespace spill

#endif  // SPILL_MEMORY_MEMORY_OPTIONS_H_
