#include "memory/memory_options.h"

#include <algorithm>
#include <initializer_list>

#include "framework/base/strings.h"
#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/scheduler_registry.h"

namespace spill {

const std::vector<MemoryMode>& MemoryModes() {
  // A mode sets the technique switches and names its scheduler; a mode that
  // comes with its own placement names its allocator (others keep the one
  // chosen) and may turn compaction off.
  static const auto* modes = new std::vector<MemoryMode>{
      {"baseline", "every tensor has its own block for the whole iteration", false, false, false,
       false, "superneurons", nullptr, true},
      {"liveness", "tensors are freed after their last reader (SuperNeurons 3.2)", true, false,
       false, false, "superneurons", nullptr, true},
      {"offload", "liveness + checkpoint outputs offloaded to host and prefetched", true, true,
       false, false, "superneurons", nullptr, true},
      {"recompute", "liveness + cheap layers' outputs dropped and recomputed", true, false, false,
       true, "superneurons", nullptr, true},
      {"offload_recompute", "liveness + offload + recompute, both on a schedule", true, true, false,
       true, "superneurons", nullptr, true},
      {"superneurons",
       "liveness + offload + recompute + the LRU tensor cache: nothing moves while memory "
       "suffices",
       true, true, true, true, "superneurons", nullptr, true},
      {"window",
       "liveness + any transient tensor swapped by a byte window over the iteration under a "
       "budget",
       true, true, false, false, "window", nullptr, true},
      {"lms", "liveness + swaps at fixed step distances (the LMS-like baseline)", true, true, false,
       false, "lms", nullptr, true},
      {"dymem",
       "liveness + Dymem's offload set, lazy release, Algorithm 2 prefetch; GTBM, no compaction",
       true, true, false, false, "dymem", "gtbm", false},
      {"vdnn",
       "convolution inputs offloaded, every copy waited for at its step's end, prefetch one "
       "layer ahead; best fit, no compaction",
       true, true, false, false, "vdnn", "best_fit", false},
      {"memonger",
       "every output dropped but each sqrt(N)-th layer's, segments rerun in backward (MXNet "
       "memonger)",
       true, false, false, false, "memonger", nullptr, true},
      {"greedy",
       "the plan searched for under memory.planner.limit: the cheapest move per byte at the peak",
       true, true, false, false, "greedy", nullptr, true, /*searches=*/true},
      {"search",
       "the plan searched for under memory.planner.limit: greedy's, improved by descent and "
       "annealing to the least simulated time (searches for seconds); best fit",
       true, true, false, false, "search", "best_fit", true, /*searches=*/true, /*costly=*/true},
      {"dqn",
       "the plan a deep Q-network learns under memory.planner.limit (trains for minutes, then "
       "cached)",
       true, true, false, false, "dqn", nullptr, true, /*searches=*/true, /*costly=*/true},
      {"milp",
       "the exact mixed-integer program under memory.planner.limit (COIN-OR CBC, solves for "
       "minutes)",
       true, true, false, false, "milp", nullptr, true, /*searches=*/true, /*costly=*/true},
  };
  return *modes;
}

std::vector<std::string> MemoryModeNames() {
  std::vector<std::string> names;
  for (const MemoryMode& m : MemoryModes()) names.push_back(m.name);
  return names;
}

const MemoryMode* FindMemoryMode(const std::string& name) {
  for (const MemoryMode& m : MemoryModes()) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

Status ApplyMemoryMode(const std::string& mode, MemoryOptions* options) {
  const MemoryMode* p = FindMemoryMode(mode);
  if (p == nullptr) {
    return InvalidArgument("unknown memory mode '" + mode +
                           "'; known modes: " + Join(MemoryModeNames()));
  }
  options->mode = mode;
  options->liveness = p->liveness;
  options->offload = p->offload;
  options->cache = p->cache;
  options->recompute = p->recompute;
  options->scheduler = p->scheduler;
  if (p->allocator != nullptr) options->allocator = p->allocator;
  options->compact = p->compact;
  return Status::Ok();
}

std::string ParamPlacement::ToString() const {
  switch (kind) {
    case Kind::kDevice:
      return "device";
    case Kind::kHost:
      return "host";
    case Kind::kAbove:
      return "above:" + FormatBytes(static_cast<double>(above));
    case Kind::kCache:
      return "cache";
  }
  return "?";
}

StatusOr<ParamPlacement> ParseParamPlacement(const std::string& text) {
  ParamPlacement p;
  if (text == "device") return p;
  if (text == "host") {
    p.kind = ParamPlacement::Kind::kHost;
    return p;
  }
  if (text == "cache") {
    p.kind = ParamPlacement::Kind::kCache;
    return p;
  }
  if (text.rfind("above:", 0) == 0) {
    SPILL_ASSIGN_OR_RETURN(p.above, ParseBytes(text.substr(6)));
    p.kind = ParamPlacement::Kind::kAbove;
    return p;
  }
  return InvalidArgument("unknown parameter placement '" + text +
                         "'; expected device, host, above:SIZE (e.g. above:1MiB) or cache");
}

StatusOr<int64_t> ParseBatchChunk(const std::string& text) {
  if (text == "off") return kBatchChunkOff;
  if (text == "auto") return kBatchChunkAuto;
  const std::string expected = "must be off, auto or images per slice of the batch in [1, " +
                               std::to_string(kMaxBatchChunk) + "] (got '" + text + "')";
  if (text.empty() || text.size() > 9) return InvalidArgument(expected);
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == text.size()) {
    const int64_t images = std::stoll(text);
    if (images < 1 || images > kMaxBatchChunk) return InvalidArgument(expected);
    return images;
  }
  if (digits > 0 && ParseBytes(text).ok()) {
    return InvalidArgument("'" + text +
                           "' is a byte size: memory.chunk counts images per slice of the "
                           "batch (off, auto or N); the va allocator's physical chunk is "
                           "memory.va_chunk");
  }
  return InvalidArgument(expected);
}

std::string BatchChunkName(int64_t chunk) {
  if (chunk == kBatchChunkOff) return "off";
  if (chunk == kBatchChunkAuto) return "auto";
  return std::to_string(chunk);
}

Status CheckHostTier(const std::string& tier) {
  if (tier == "ram" || (tier.rfind("file:", 0) == 0 && tier.size() > 5)) return Status::Ok();
  return InvalidArgument("memory: host_tier must be ram or file:DIRECTORY (got '" + tier + "')");
}

Status CheckStreamBuffers(int64_t buffers) {
  if (buffers == 1 || buffers == 2) return Status::Ok();
  return InvalidArgument("memory: stream_buffers must be 1 or 2 (got " + std::to_string(buffers) +
                         ")");
}

Status MemoryOptions::Validate() const {
  if (gradients_leave && params.kind != ParamPlacement::Kind::kDevice) {
    return InvalidArgument(
        "memory: gradients that leave the device after backward (distributed."
        "zero 2) need parameters on the device (memory.params: device); "
        "parameters in host memory move their gradients there already");
  }
  if (params_gathered && !gradients_leave) {
    return InvalidArgument(
        "memory: parameters gathered for each step (distributed.zero 3) need their gradients "
        "to leave the device after backward too (zero 2's part of stage 3)");
  }
  if (!liveness && (offload || cache || recompute)) {
    return InvalidArgument("memory: offload, cache and recompute need liveness (mode '" + mode +
                           "')");
  }
  if (cache && !offload && !recompute) {
    return InvalidArgument("memory: the tensor cache needs offload or recompute to evict with");
  }
  if (device_budget < kPoolBlockBytes) {
    return InvalidArgument("memory: a device budget of " + std::to_string(device_budget) +
                           " bytes is below one pool block");
  }
  if (params.kind == ParamPlacement::Kind::kCache && !cache) {
    return InvalidArgument(
        "memory: params: cache needs the tensor cache (mode superneurons, or "
        "cache: true)");
  }
  if (update_on_host && params.kind != ParamPlacement::Kind::kHost &&
      params.kind != ParamPlacement::Kind::kAbove) {
    return InvalidArgument(
        "memory: update: host needs parameters in host memory (params: host "
        "or above:SIZE)");
  }
  if (updates_after_iteration && !update_on_host &&
      (params.kind == ParamPlacement::Kind::kHost || params.kind == ParamPlacement::Kind::kAbove)) {
    return InvalidArgument(
        "memory: a solver step after the iteration (fp16's loss scaling) updates parameters "
        "that live in host memory there: it needs update: host");
  }
  SPILL_RETURN_IF_ERROR(CheckHostTier(host_tier));
  if (batch_chunk != kBatchChunkAuto && (batch_chunk < 0 || batch_chunk > kMaxBatchChunk)) {
    return InvalidArgument("memory: chunk must be off, auto or in [1, " +
                           std::to_string(kMaxBatchChunk) + "] images");
  }
  SPILL_RETURN_IF_ERROR(CheckStreamBuffers(stream_buffers));
  for (const std::string& unknown :
       {Allocators().Find(allocator) ? "" : Allocators().Unknown(allocator),
        EvictionRules().Find(eviction) ? "" : EvictionRules().Unknown(eviction),
        Schedulers().Find(scheduler) ? "" : Schedulers().Unknown(scheduler)}) {
    if (!unknown.empty()) return InvalidArgument("memory: " + unknown);
  }
  return Status::Ok();
}

std::string MemoryOptions::Describe() const {
  std::string text = mode + " (";
  std::string parts;
  if (liveness) parts += "liveness";
  if (offload) parts += std::string(parts.empty() ? "" : " + ") + "offload";
  if (cache) parts += std::string(parts.empty() ? "" : " + ") + "cache";
  if (recompute) parts += std::string(parts.empty() ? "" : " + ") + "recompute";
  if (parts.empty()) parts = "no reuse";
  text +=
      parts + "), " + allocator + " allocator" + DescribeSettings(*this, "allocator", allocator);
  if (cache) text += ", " + eviction + " eviction";
  const std::string scheduled = DescribeSettings(*this, "scheduler", scheduler);
  if (scheduler != MemoryOptions().scheduler || !scheduled.empty()) {
    text += ", " + scheduler + " scheduler" + scheduled;
  }
  if (batch_chunk != kBatchChunkOff) {
    text += ", batch slices of " + BatchChunkName(batch_chunk);
    if (stream_buffers == 1) text += " (streamed single-buffered)";
  }
  if (!compact) text += ", no compaction";
  if (params.kind != ParamPlacement::Kind::kDevice) {
    text += ", parameters " + params.ToString() + ", updated on " +
            (update_on_host ? "host" : "device");
  }
  if (host_tier != "ram") text += ", host memory on disk (" + host_tier.substr(5) + ")";
  return text + ", device budget " + FormatBytes(static_cast<double>(device_budget));
}

}  // namespace spill
