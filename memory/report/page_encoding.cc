#include "memory/report/page_encoding.h"

#include <algorithm>

namespace spill {
namespace {

// Characters an integer takes in JSON, with its comma.
size_t JsonLength(int64_t value) {
  size_t length = value < 0 ? 2 : 1;
  for (uint64_t v = value < 0 ? -static_cast<uint64_t>(value) : value; v >= 10; v /= 10) ++length;
  return length + 1;
}

// Length of a shared prefix, counted in UTF-16 units as JavaScript strings
// are (bytes 0x80..0xBF continue a UTF-8 character; four-byte characters
// take two units).
size_t Utf16Units(const std::string& text, size_t bytes) {
  size_t units = 0;
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) units += c >= 0xF0 ? 2 : 1;
  }
  return units;
}

}  // namespace

nlohmann::json EncodeColumn(const std::vector<int64_t>& values, int64_t unit) {
  nlohmann::json column = nlohmann::json::object();
  if (unit > 1 &&
      !std::all_of(values.begin(), values.end(), [unit](int64_t v) { return v % unit == 0; })) {
    unit = 1;
  }
  std::vector<int64_t> scaled(values.size()), deltas(values.size());
  size_t plain_length = 0, delta_length = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    scaled[i] = values[i] / unit;
    deltas[i] = i == 0 ? scaled[i] : scaled[i] - scaled[i - 1];
    plain_length += JsonLength(scaled[i]);
    delta_length += JsonLength(deltas[i]);
  }
  if (unit > 1) column["u"] = unit;
  if (!scaled.empty() &&
      std::all_of(scaled.begin(), scaled.end(), [&](int64_t v) { return v == scaled.front(); })) {
    column["c"] = scaled.front();
  } else if (delta_length < plain_length) {
    column["d"] = deltas;
  } else {
    column["v"] = scaled;
  }
  return column;
}

void PutColumn(nlohmann::json& obj, const char* key, const std::vector<int64_t>& values,
               int64_t unit) {
  if (std::all_of(values.begin(), values.end(), [](int64_t v) { return v == 0; })) return;
  obj[key] = EncodeColumn(values, unit);
}

nlohmann::json EncodeNames(const std::vector<std::string>& names) {
  std::vector<int64_t> shared;
  std::vector<std::string> rest;
  shared.reserve(names.size());
  rest.reserve(names.size());
  const std::string* previous = nullptr;
  for (const std::string& name : names) {
    size_t common = 0;
    if (previous != nullptr) {
      const size_t most = std::min(previous->size(), name.size());
      while (common < most && (*previous)[common] == name[common]) ++common;
      // Never split a UTF-8 character.
      while (common > 0 && common < name.size() &&
             (static_cast<unsigned char>(name[common]) & 0xC0) == 0x80) {
        --common;
      }
    }
    shared.push_back(static_cast<int64_t>(Utf16Units(name, common)));
    rest.push_back(name.substr(common));
    previous = &name;
  }
  return {{"p", shared}, {"s", rest}};
}

int StringTable::Index(const std::string& text) {
  auto [it, added] = index_.emplace(text, static_cast<int>(strings_.size()));
  if (added) strings_.push_back(text);
  return it->second;
}

std::string ScriptSafeJson(const nlohmann::json& data) {
  // Invalid UTF-8 in a name becomes U+FFFD rather than an exception.
  const std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace spill
