#include "memory/memory_options.h"

namespace spill {

std::vector<std::string> MemoryModeNames() {
  return {"baseline", "liveness", "offload", "recompute", "offload_recompute", "superneurons"};
}

Status ApplyMemoryMode(const std::string& mode, MemoryOptions* options) {
  struct Preset {
    const char* name;
    bool liveness, offload, cache, recompute;
  };
  static const Preset kPresets[] = {
      {"baseline", false, false, false, false},       {"liveness", true, false, false, false},
      {"offload", true, true, false, false},          {"recompute", true, false, false, true},
      {"offload_recompute", true, true, false, true}, {"superneurons", true, true, true, true},
  };
  for (const Preset& p : kPresets) {
    if (mode != p.name) continue;
    options->mode = mode;
    options->liveness = p.liveness;
    options->offload = p.offload;
    options->cache = p.cache;
    options->recompute = p.recompute;
    return Status::Ok();
  }
  std::string names;
  for (const auto& n : MemoryModeNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown memory mode '" + mode + "'; known modes: " + names);
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
  return text + parts + "), device budget " + FormatBytes(static_cast<double>(device_budget));
}

}  // namespace spill
