// Compact JSON for the memory page's data: integer columns (constant, plain
// or delta-coded, in a unit such as KiB), string tables and front-coded
// names. Each form has its decoder in memory/report/page/page_model.js
// (decodeColumn, decodeNames); the two change together.
#ifndef SPILL_MEMORY_REPORT_PAGE_ENCODING_H_
#define SPILL_MEMORY_REPORT_PAGE_ENCODING_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

namespace spill {

// Bytes on the device are whole KiB (pool blocks); columns of them say so
// once instead of carrying three zeros per value.
constexpr int64_t kKibUnit = 1024;

// A column of integers:
//   {"c": v}              every value is v
//   {"v": [...]}          the values
//   {"d": [...]}          the first value, then each value minus the one before
// with "u": U when every value is a multiple of `unit` (values then divided
// by U). The shorter of the plain and delta forms is chosen. An absent
// column means every value is 0 (PutColumn omits it).
nlohmann::json EncodeColumn(const std::vector<int64_t>& values, int64_t unit = 1);
// Sets obj[key] to the column unless every value is 0.
void PutColumn(nlohmann::json& obj, const char* key, const std::vector<int64_t>& values,
               int64_t unit = 1);

// Names sorted as they come, each sharing a prefix with the one before:
// {"p": [shared prefix lengths in UTF-16 units], "s": [the rest]}.
nlohmann::json EncodeNames(const std::vector<std::string>& names);

// Distinct strings, each with its index in order of first use.
class StringTable {
 public:
  int Index(const std::string& text);
  nlohmann::json Strings() const { return strings_; }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int> index_;
};

// Escapes a JSON text for a <script> element: '<' as \u003c, so that no
// "</script>" or "<!--" inside a string ends or alters the element.
std::string ScriptSafeJson(const nlohmann::json& data);

}  // namespace spill

#endif  // SPILL_MEMORY_REPORT_PAGE_ENCODING_H_
