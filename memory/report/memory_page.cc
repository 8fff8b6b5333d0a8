#include "memory/report/memory_page.h"

#include <algorithm>
#include <cmath>

#include "memory/heap_pool.h"
#include "memory/report/address_map.h"
#include "memory/report/page/page_assets.h"
#include "memory/report/page_encoding.h"
#include "memory/report/svg.h"
#include "memory/residency.h"

namespace spill {
namespace {

using Json = nlohmann::json;
using Column = std::vector<int64_t>;

constexpr int kPageFormat = 1;
constexpr double kNanosecondsPerSecond = 1e9;
constexpr int kNumTensorKinds = static_cast<int>(TensorKind::kOptimizerState) + 1;
constexpr int kNumEventTypes = static_cast<int>(MemoryEventType::kAllGather) + 1;
// A block's causes in one column: placed * kCauseBase + evicted.
constexpr int64_t kCauseBase = 8;
static_assert(static_cast<int64_t>(EvictedBy::kDrop) < kCauseBase, "causes overlap");

int64_t Int(size_t value) { return static_cast<int64_t>(value); }

// The bytes a tensor's device block takes.
size_t BlockBytes(const TensorInfo& info) { return RoundToBlocks(std::max<size_t>(info.bytes, 1)); }

// Tensors as (owner layer, template): a template is the name's suffix after
// the layer's name (or the whole name), the kind, the size and the storage
// type, which repeat from unit to unit of a deep network.
Json TensorColumns(const Schedule& schedule, const std::vector<std::string>& layer_names) {
  StringTable templates;
  Json suffixes = Json::array();
  Column layer, shape, kinds, bytes, whole, dtypes;
  for (const TensorInfo& t : schedule.tensors) {
    const std::string* owner = t.layer >= 0 && t.layer < static_cast<int>(layer_names.size())
                                   ? &layer_names[t.layer]
                                   : nullptr;
    const bool prefixed = owner != nullptr && t.name.compare(0, owner->size(), *owner) == 0;
    const std::string suffix = prefixed ? t.name.substr(owner->size()) : t.name;
    const int index = templates.Index(suffix + '\n' + std::to_string(static_cast<int>(t.kind)) +
                                      '\n' + std::to_string(t.bytes) + '\n' + DTypeName(t.dtype) +
                                      (prefixed ? "" : "\n*"));
    if (index == static_cast<int>(suffixes.size())) {
      suffixes.push_back(suffix);
      kinds.push_back(static_cast<int64_t>(t.kind));
      bytes.push_back(Int(t.bytes));
      whole.push_back(prefixed ? 0 : 1);
      dtypes.push_back(static_cast<int64_t>(t.dtype));
    }
    layer.push_back(t.layer);
    shape.push_back(index);
  }
  Json out = {{"count", schedule.tensors.size()}, {"layer", EncodeColumn(layer)},
              {"template", EncodeColumn(shape)},  {"suffix", suffixes},
              {"kind", EncodeColumn(kinds)},      {"bytes", EncodeColumn(bytes)}};
  PutColumn(out, "whole", whole);
  PutColumn(out, "dtype", dtypes);
  return out;
}

// Per step, the tensors it reads (saved ones included) and writes: a
// tensor's producer and readers.
Json StepTensors(const Schedule& schedule) {
  Column reads, read_ids, writes, write_ids;
  for (const Step& step : schedule.steps) {
    reads.push_back(Int(step.reads.size() + step.saved.size()));
    for (TensorId id : step.reads) read_ids.push_back(id);
    for (TensorId id : step.saved) read_ids.push_back(id);
    writes.push_back(Int(step.writes.size()));
    for (TensorId id : step.writes) write_ids.push_back(id);
  }
  return {{"count", schedule.steps.size()},
          {"reads", EncodeColumn(reads)},
          {"read", EncodeColumn(read_ids)},
          {"writes", EncodeColumn(writes)},
          {"written", EncodeColumn(write_ids)}};
}

Json Summary(const PageMode& m) {
  const MemoryLog& log = *m.log;
  Json s = {{"peak", log.peak},
            {"peak_step", log.peak_step},
            {"persistent", log.persistent},
            {"footprint", m.footprint},
            {"to_host", log.to_host},
            {"to_device", log.to_device},
            {"recomputations", m.recomputations},
            {"compacted", log.compacted},
            {"host_peak", log.host_peak},
            {"streamed", log.streamed}};
  if (m.timeline != nullptr) {
    const TimelineSummary t = Summarize(*m.timeline);
    s["seconds"] = t.iteration_seconds;
    s["compute_seconds"] = t.compute_seconds;
    s["copy_seconds"] = t.copy_seconds;
    s["duplex_seconds"] = t.duplex_seconds;
    s["overlap"] = t.overlap();
    s["compute_wait_seconds"] = t.compute_wait_seconds;
    s["host_wait_seconds"] = t.host_wait_seconds;
  }
  return s;
}

Json StepColumns(const MemoryLog& log) {
  const size_t n = log.steps.size();
  Json out = Json::object();
  size_t forward = 0;
  while (forward < n && log.steps[forward].pass == Pass::kForward) ++forward;
  out["count"] = n;
  out["forward"] = forward;
  Column layer, pass, peak, live, to_host, to_device, recomputed, compacted, workspace, host, slice,
      algorithm;
  std::vector<Column> in_use(kNumCategories);
  StringTable algorithms;
  algorithms.Index("");
  for (const StepRecord& r : log.steps) {
    layer.push_back(r.layer);
    pass.push_back(r.pass == Pass::kForward ? 0 : 1);
    for (int c = 0; c < kNumCategories; ++c) in_use[c].push_back(Int(r.in_use[c]));
    peak.push_back(Int(r.peak) - Int(r.total));
    live.push_back(r.live_tensors);
    to_host.push_back(Int(r.to_host));
    to_device.push_back(Int(r.to_device));
    recomputed.push_back(r.recomputed);
    compacted.push_back(Int(r.compacted));
    workspace.push_back(Int(r.workspace));
    host.push_back(Int(r.host));
    slice.push_back(r.slice_images);
    algorithm.push_back(algorithms.Index(r.algorithm));
  }
  out["layer"] = EncodeColumn(layer);
  // Forward steps first, then backward: the count says it, unless not.
  if (std::any_of(log.steps.begin() + forward, log.steps.end(),
                  [](const StepRecord& r) { return r.pass == Pass::kForward; })) {
    out["pass"] = EncodeColumn(pass);
  }
  Json use = Json::array();
  for (const Column& c : in_use) use.push_back(EncodeColumn(c, kKibUnit));
  out["in_use"] = use;
  PutColumn(out, "peak", peak, kKibUnit);
  PutColumn(out, "live", live);
  PutColumn(out, "to_host", to_host);
  PutColumn(out, "to_device", to_device);
  PutColumn(out, "recomputed", recomputed);
  PutColumn(out, "compacted", compacted);
  PutColumn(out, "workspace", workspace, kKibUnit);
  PutColumn(out, "host", host, kKibUnit);
  PutColumn(out, "slice", slice);
  PutColumn(out, "algorithm", algorithm);
  out["algorithms"] = algorithms.Strings();
  return out;
}

// Blocks in order of placement; offsets as the gap after the block before,
// bytes only where they differ from the tensor's, why each was placed and
// evicted in one number.
Json BlockColumns(const AddressMap& map, const Schedule& schedule) {
  Column begin, life, gap, bytes, tensor, cause, category, move_block, move_event, move_offset;
  bool categories_differ = false;
  int64_t previous_end = 0;
  for (size_t b = 0; b < map.blocks.size(); ++b) {
    const MapBlock& block = map.blocks[b];
    begin.push_back(block.begin);
    life.push_back(block.end < 0 ? 0 : block.end - block.begin);
    gap.push_back(Int(block.offset) - previous_end);
    previous_end = Int(block.offset + block.bytes);
    const bool is_tensor = block.tensor != kNoTensor;
    const TensorInfo* info = is_tensor ? &schedule.tensors[block.tensor] : nullptr;
    bytes.push_back(is_tensor && block.bytes == BlockBytes(*info) ? 0 : Int(block.bytes));
    tensor.push_back(block.tensor + 1);
    cause.push_back(static_cast<int64_t>(block.placed) * kCauseBase +
                    static_cast<int64_t>(block.evicted));
    category.push_back(static_cast<int64_t>(block.category));
    const MemoryCategory expected = is_tensor ? CategoryOf(info->kind) : MemoryCategory::kWorkspace;
    categories_differ |= block.category != expected;
    for (const auto& [event, offset] : block.moves) {
      move_block.push_back(Int(b));
      move_event.push_back(event);
      move_offset.push_back(Int(offset));
    }
  }
  Json out = {{"count", map.blocks.size()},
              {"begin", EncodeColumn(begin)},
              {"life", EncodeColumn(life)},
              {"gap", EncodeColumn(gap, kKibUnit)},
              {"tensor", EncodeColumn(tensor)}};
  PutColumn(out, "bytes", bytes, kKibUnit);
  PutColumn(out, "cause", cause);
  if (categories_differ) out["category"] = EncodeColumn(category);
  if (!move_block.empty()) {
    out["moves"] = {{"block", EncodeColumn(move_block)},
                    {"event", EncodeColumn(move_event)},
                    {"offset", EncodeColumn(move_offset, kKibUnit)}};
  }
  return out;
}

// The events that move bytes or compute: offloads, prefetches, drops,
// rebuilds, streams, compactions, updates. ref: the tensor + 1, or the
// layer of a recomputation; bytes: 0 for the tensor's, -1 for none.
Json ActionColumns(const std::vector<MemoryEvent>& events, const Schedule& schedule) {
  Column type, index, ref, bytes;
  for (size_t i = 0; i < events.size(); ++i) {
    const MemoryEvent& e = events[i];
    switch (e.type) {
      case MemoryEventType::kAlloc:
      case MemoryEventType::kFree:
      case MemoryEventType::kResident:
      case MemoryEventType::kMove:
      case MemoryEventType::kCompute:
      case MemoryEventType::kIdle:
      case MemoryEventType::kRemap:
        continue;
      default:
        break;
    }
    type.push_back(static_cast<int64_t>(e.type));
    index.push_back(Int(i));
    const bool layer = e.type == MemoryEventType::kRecompute;
    ref.push_back(layer ? e.layer : e.tensor + 1);
    const bool whole = e.tensor != kNoTensor && e.bytes == schedule.tensors[e.tensor].bytes;
    bytes.push_back(whole ? 0 : e.bytes == 0 ? -1 : Int(e.bytes));
  }
  Json out = {{"count", type.size()}};
  PutColumn(out, "type", type);
  PutColumn(out, "event", index);
  PutColumn(out, "ref", ref);
  PutColumn(out, "bytes", bytes);
  return out;
}

Json EventColumns(const AddressMap& map, size_t count) {
  Column first(map.step_first.begin(), map.step_first.end());
  Column record;
  for (size_t s = 0; s < map.step_record.size(); ++s) {
    record.push_back(map.step_record[s] - map.step_first[s]);
  }
  Json out = {{"count", count}, {"first", EncodeColumn(first)}};
  PutColumn(out, "record", record);
  return out;
}

// Slices as columns; a compute slice named after its step ("conv1
// forward") carries no name.
Json TimelineColumns(const Timeline& timeline, const Schedule& schedule,
                     const std::vector<std::string>& layer_names) {
  StringTable names, categories;
  Column lane, category, start, duration, step, bytes, name;
  for (const TimelineSlice& s : timeline.slices) {
    lane.push_back(static_cast<int64_t>(s.lane));
    category.push_back(categories.Index(s.category));
    start.push_back(std::llround(s.start * kNanosecondsPerSecond));
    duration.push_back(std::llround(s.duration * kNanosecondsPerSecond));
    step.push_back(s.step);
    bytes.push_back(Int(s.bytes));
    bool derived = false;
    if (s.step >= 0 && s.step < static_cast<int>(schedule.steps.size())) {
      const Step& st = schedule.steps[s.step];
      derived =
          st.layer >= 0 && st.layer < static_cast<int>(layer_names.size()) &&
          s.name == layer_names[st.layer] + (st.pass == Pass::kForward ? " forward" : " backward");
    }
    name.push_back(derived ? -1 : names.Index(s.name));
  }
  Json out = {{"title", timeline.title},
              {"seconds", timeline.seconds},
              {"count", timeline.slices.size()},
              {"lanes", Json::array()},
              {"categories", categories.Strings()},
              {"names", names.Strings()}};
  for (Lane l : kLanes) out["lanes"].push_back(LaneName(l));
  PutColumn(out, "lane", lane);
  PutColumn(out, "category", category);
  PutColumn(out, "start", start);
  PutColumn(out, "duration", duration);
  PutColumn(out, "step", step);
  PutColumn(out, "bytes", bytes);
  PutColumn(out, "name", name);
  return out;
}

}  // namespace

PageMode PlannedPageMode(const std::string& mode, const MemoryOptions& options,
                         const MemoryPlan& plan, const Timeline* timeline) {
  PageMode m;
  m.mode = mode;
  m.allocator = options.allocator;
  m.budget = options.device_budget >= kUnlimitedBudget ? 0 : options.device_budget;
  m.fits = plan.fits;
  m.failure = plan.failure;
  if (!plan.fits) return m;
  m.log = &plan.log;
  m.events = &plan.events;
  m.footprint = plan.footprint;
  m.recomputations = plan.recomputations;
  m.timeline = timeline;
  return m;
}

PageMode RunPageMode(const MemoryOptions& options, const MemoryLog& log,
                     const std::vector<MemoryEvent>& events, size_t footprint,
                     const Timeline* timeline) {
  PageMode m;
  m.mode = options.mode;
  m.allocator = options.allocator;
  m.budget = options.device_budget >= kUnlimitedBudget ? 0 : options.device_budget;
  m.log = &log;
  m.events = &events;
  m.footprint = footprint;
  m.recomputations = log.recomputed;
  m.timeline = timeline;
  return m;
}

MemoryPage::MemoryPage(const PageSubject& subject) : schedule_(*subject.schedule) {
  Json categories = Json::array(), kinds = Json::array(), kind_category = Json::array(),
       event_names = Json::array();
  for (int c = 0; c < kNumCategories; ++c) {
    categories.push_back(MemoryCategoryName(static_cast<MemoryCategory>(c)));
  }
  for (int k = 0; k < kNumTensorKinds; ++k) {
    kinds.push_back(TensorKindName(static_cast<TensorKind>(k)));
    kind_category.push_back(static_cast<int>(CategoryOf(static_cast<TensorKind>(k))));
  }
  for (int t = 0; t < kNumEventTypes; ++t) {
    event_names.push_back(MemoryEventName(static_cast<MemoryEventType>(t)));
  }
  Json dtypes = Json::array();
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) dtypes.push_back(DTypeName(d));
  Json transient = Json::array();
  for (int k = 0; k < kNumTensorKinds; ++k) {
    if (IsTransient(static_cast<TensorKind>(k))) transient.push_back(k);
  }
  Json placed = Json::array(), evicted = Json::array();
  for (int c = 0; c <= static_cast<int>(PlacedBy::kStaging); ++c) {
    placed.push_back(PlacedByName(static_cast<PlacedBy>(c)));
  }
  for (int c = 0; c <= static_cast<int>(EvictedBy::kDrop); ++c) {
    evicted.push_back(EvictedByName(static_cast<EvictedBy>(c)));
  }
  data_ = {{"format", kPageFormat},
           {"title", subject.title},
           {"origin", subject.origin},
           {"categories", categories},
           {"kinds", kinds},
           {"kind_category", kind_category},
           {"dtypes", dtypes},
           {"transient_kinds", transient},
           {"event_names", event_names},
           {"placed_by", placed},
           {"evicted_by", evicted},
           {"layers", EncodeNames(subject.layer_names)},
           {"tensors", TensorColumns(schedule_, subject.layer_names)},
           {"steps", StepTensors(schedule_)},
           {"modes", Json::array()}};
  layer_names_ = subject.layer_names;
}

void MemoryPage::AddMode(const PageMode& m) {
  Json mode = {{"mode", m.mode}, {"allocator", m.allocator}, {"fits", m.fits && m.log != nullptr}};
  if (m.budget > 0) mode["budget"] = m.budget;
  if (!m.fits || m.log == nullptr) {
    mode["failure"] = m.failure;
    data_["modes"].push_back(std::move(mode));
    return;
  }
  mode["summary"] = Summary(m);
  mode["steps"] = StepColumns(*m.log);
  if (m.events != nullptr) {
    const AddressMap map =
        BuildAddressMap(*m.events, schedule_, static_cast<int>(m.log->steps.size()));
    mode["events"] = EventColumns(map, m.events->size());
    mode["blocks"] = BlockColumns(map, schedule_);
    mode["actions"] = ActionColumns(*m.events, schedule_);
  }
  if (m.timeline != nullptr && !m.timeline->slices.empty()) {
    mode["timeline"] = TimelineColumns(*m.timeline, schedule_, layer_names_);
  }
  data_["modes"].push_back(std::move(mode));
}

std::string MemoryPage::Html() const {
  const std::string title = data_["title"].get<std::string>();
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + XmlEscaped(title) + " - device memory</title>\n<style>\n";
  html += kMemoryPageStyle;
  html +=
      "</style>\n</head>\n<body>\n<div id=\"app\"><noscript>This page draws with "
      "JavaScript.</noscript></div>\n<script type=\"application/json\" id=\"spill-data\">";
  html += ScriptSafeJson(data_);
  html += "</script>\n<script>\n";
  html += kMemoryPageScript;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace spill
