#include "memory/memory_options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "memory/allocators/allocator.h"
#include "memory/eviction/eviction.h"
#include "memory/transfer_plan.h"

namespace spill {

std::vector<std::string> MemoryModeNames() {
  return {"baseline",     "liveness", "offload", "recompute", "offload_recompute",
          "superneurons", "window",   "lms",     "dymem",     "vdnn"};
}

Status ApplyMemoryMode(const std::string& mode, MemoryOptions* options) {
  // A mode sets the technique switches and names its scheduler; a mode that
  // comes with its own placement names its allocator (others keep the one
  // chosen) and may turn compaction off.
  struct Preset {
    const char* name;
    bool liveness, offload, cache, recompute;
    const char* scheduler;
    const char* allocator;  // nullptr: keep
    bool compact;
  };
  static const Preset kPresets[] = {
      {"baseline", false, false, false, false, "superneurons", nullptr, true},
      {"liveness", true, false, false, false, "superneurons", nullptr, true},
      {"offload", true, true, false, false, "superneurons", nullptr, true},
      {"recompute", true, false, false, true, "superneurons", nullptr, true},
      {"offload_recompute", true, true, false, true, "superneurons", nullptr, true},
      {"superneurons", true, true, true, true, "superneurons", nullptr, true},
      {"window", true, true, false, false, "window", nullptr, true},
      {"lms", true, true, false, false, "lms", nullptr, true},
      {"dymem", true, true, false, false, "dymem", "gtbm", false},
      {"vdnn", true, true, false, false, "vdnn", "best_fit", false},
  };
  for (const Preset& p : kPresets) {
    if (mode != p.name) continue;
    options->mode = mode;
    options->liveness = p.liveness;
    options->offload = p.offload;
    options->cache = p.cache;
    options->recompute = p.recompute;
    options->scheduler = p.scheduler;
    if (p.allocator != nullptr) options->allocator = p.allocator;
    options->compact = p.compact;
    return Status::Ok();
  }
  std::string names;
  for (const auto& n : MemoryModeNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown memory mode '" + mode + "'; known modes: " + names);
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

size_t SizeSetting::Of(size_t base) const {
  if (bytes > 0) return bytes;
  const double scaled = factor * static_cast<double>(base);
  // Multiples of an unlimited budget saturate instead of wrapping around.
  if (scaled >= static_cast<double>(SIZE_MAX / 2)) return SIZE_MAX / 2;
  return static_cast<size_t>(scaled);
}

std::string SizeSetting::ToString() const {
  if (bytes > 0) return FormatBytes(static_cast<double>(bytes));
  char text[32];
  std::snprintf(text, sizeof(text), "%gx", factor);
  return text;
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

StatusOr<SizeSetting> ParseSizeSetting(const std::string& text) {
  SizeSetting setting;
  if (!text.empty() && (text.back() == 'x' || text.back() == 'X')) {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    const double factor = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(factor) ||
        factor <= 0) {
      return InvalidArgument("'" + text + "' is not a positive multiple such as 1.5x");
    }
    setting.factor = factor;
    return setting;
  }
  auto bytes = ParseBytes(text);
  if (!bytes.ok() || *bytes == 0) {
    return InvalidArgument("'" + text +
                           "' is neither a multiple such as 1.5x nor a size such as 8GiB");
  }
  setting.bytes = *bytes;
  return setting;
}

Status MemoryOptions::Validate() const {
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
  if (prefetch_ahead < 0) return InvalidArgument("memory: prefetch_ahead must be >= 0");
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
  if (host_tier != "ram" && (host_tier.rfind("file:", 0) != 0 || host_tier.size() <= 5)) {
    return InvalidArgument("memory: host_tier must be ram or file:DIRECTORY (got '" + host_tier +
                           "')");
  }
  if (lms_threshold < 2) {
    return InvalidArgument("memory: lms_threshold must be at least 2 steps (got " +
                           std::to_string(lms_threshold) + ")");
  }
  if (lms_ahead < 0) return InvalidArgument("memory: lms_ahead must be >= 0");
  if (batch_chunk != kBatchChunkAuto && (batch_chunk < 0 || batch_chunk > kMaxBatchChunk)) {
    return InvalidArgument("memory: chunk must be off, auto or in [1, " +
                           std::to_string(kMaxBatchChunk) + "] images");
  }
  if (va_chunk < kChunkAlignmentBytes || va_chunk % kChunkAlignmentBytes != 0) {
    return InvalidArgument("memory: va_chunk must be a positive multiple of 4 KiB (got " +
                           std::to_string(va_chunk) + " bytes)");
  }
  auto one_of = [](const std::string& key, const std::string& value,
                   std::initializer_list<const char*> choices) {
    std::string text;
    for (const char* c : choices) {
      if (value == c) return Status::Ok();
      text += (text.empty() ? "" : " or ") + std::string(c);
    }
    return InvalidArgument("memory: " + key + " '" + value + "'; expected " + text);
  };
  SPILL_RETURN_IF_ERROR(one_of("offload_set", offload_set, {"dymem", "conv"}));
  SPILL_RETURN_IF_ERROR(one_of("release", release, {"lazy", "eager"}));
  SPILL_RETURN_IF_ERROR(one_of("prefetch", prefetch, {"dymem", "ahead"}));
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
  text += parts + "), " + allocator + " allocator";
  if (cache) text += ", " + eviction + " eviction";
  if (scheduler != "superneurons") text += ", " + scheduler + " scheduler";
  if (scheduler == "window") {
    text += " (budget " + window_budget.ToString() + ", window " + window.ToString() + ")";
  }
  if (allocator == "va") text += " (chunk " + FormatBytes(static_cast<double>(va_chunk)) + ")";
  if (batch_chunk != kBatchChunkOff) text += ", batch slices of " + BatchChunkName(batch_chunk);
  if (scheduler == "dymem") {
    text += " (" + offload_set + " offload set, " + release + " release, " + prefetch +
            " prefetch" + (barrier ? ", barrier" : "") + ")";
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
