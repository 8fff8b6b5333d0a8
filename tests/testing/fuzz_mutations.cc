#include "tests/testing/fuzz_mutations.h"

#include <algorithm>
#include <sstream>

namespace spill {
namespace fuzz {
namespace {

// Values that break arithmetic, ranges and types.
const std::vector<std::string> kExtremeNumbers = {"0",
                                                  "-1",
                                                  "-2147483648",
                                                  "2147483648",
                                                  "9223372036854775807",
                                                  "-9223372036854775808",
                                                  "99999999999999999999",
                                                  "1e308",
                                                  "-1e308",
                                                  "nan",
                                                  ".inf",
                                                  "1e-320",
                                                  "4294967296",
                                                  "65536",
                                                  "1000000000",
                                                  "0.5"};
const std::vector<std::string> kOtherTypes = {"[1, 2]", "{a: 1}", "~",  "''",   "true",
                                              "x",      "[]",     "{}", "\"\"", "[[1]]"};
const std::vector<std::string> kBadBytes = {
    std::string(1, '\0'), "\xff\xfe", "\t", "{", "[", ":", "&a", "*a", "\"", "- ",
    "%YAML 1.2\n",        "---\n",    "? "};
const std::vector<std::string> kExpressions = {"\"${-9223372036854775807 - 1}\"",
                                               "\"${(-9223372036854775807 - 1) / -1}\"",
                                               "\"${(-9223372036854775807 - 1) % -1}\"",
                                               "\"${9223372036854775807 * 2}\"",
                                               "\"${1 / 0}\"",
                                               "\"${1 % 0}\"",
                                               "\"${1e308 * 1e308}\"",
                                               "\"${nope + 1}\"",
                                               "\"${(}\"",
                                               "\"${}\"",
                                               "\"${1.5 % 2}\""};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Positions just after ": " or "[" or ", " where a scalar value starts.
std::vector<size_t> ValueStarts(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if ((text[i] == ':' || text[i] == ',' || text[i] == '[') && text[i + 1] == ' ') {
      starts.push_back(i + 2);
    }
  }
  return starts;
}

// Replaces the scalar starting at `start` (up to , } ] or the line's end).
std::string ReplaceValue(const std::string& text, size_t start, const std::string& value) {
  size_t end = text.find_first_of(",}]\n", start);
  if (end == std::string::npos) end = text.size();
  return text.substr(0, start) + value + text.substr(end);
}

std::string ReplaceRandomValue(const std::string& text, const std::string& value, Random& rng) {
  std::vector<size_t> starts = ValueStarts(text);
  if (starts.empty()) return text + "\n" + value + "\n";
  return ReplaceValue(text, rng.Pick(starts), value);
}

// Names of flow-map layers ("{name: x, ...}") in file order.
std::vector<std::pair<size_t, std::string>> FlowNames(const std::string& text) {
  std::vector<std::pair<size_t, std::string>> names;
  for (size_t at = text.find("{name: "); at != std::string::npos;
       at = text.find("{name: ", at + 1)) {
    size_t start = at + 7, end = text.find_first_of(",}", start);
    if (end != std::string::npos) names.push_back({at, text.substr(start, end - start)});
  }
  return names;
}

std::string Cycle(const std::string& text, Random& rng) {
  auto names = FlowNames(text);
  if (names.size() < 2) return text + "\nlayers: [{name: a, type: relu, inputs: [a]}]\n";
  size_t from = rng.Below(names.size() - 1);
  size_t to = from + 1 + rng.Below(names.size() - from - 1);
  // The earlier layer reads a later one: with the later one's own chain back
  // to it, a cycle (or at least a read of what is not yet computed).
  const size_t insert = names[from].first + 7 + names[from].second.size();
  return text.substr(0, insert) + ", inputs: [" + names[to].second + "]" + text.substr(insert);
}

std::string DuplicateKey(const std::string& text, Random& rng) {
  std::vector<std::string> lines = Lines(text);
  std::vector<size_t> keyed;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(": ") != std::string::npos) keyed.push_back(i);
  }
  if (keyed.empty()) return text;
  const size_t i = rng.Pick(keyed);
  const std::string& line = lines[i];
  const size_t brace = line.find('{');
  if (brace != std::string::npos && line.find(',', brace) != std::string::npos) {
    // {a: 1, b: 2} -> {a: 1, a: 1, b: 2}
    const size_t comma = line.find(',', brace);
    lines[i] = line.substr(0, comma) + ", " + line.substr(brace + 1, comma - brace - 1) +
               line.substr(comma);
  } else {
    lines.insert(lines.begin() + i + 1, line);  // a block-style key twice
  }
  return Join(lines);
}

std::string DeepNesting(const std::string& text, Random& rng) {
  const size_t depth = 50 + rng.Below(20000);
  const std::string value =
      rng.Below(2) ? std::string(depth, '[') + std::string(depth, ']')
                   : "\"${" + std::string(depth, '(') + "1" + std::string(depth, ')') + "}\"";
  return ReplaceRandomValue(text, value, rng);
}

std::string AliasBomb(const std::string& text, Random& rng) {
  std::string bomb = "bomb0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  const int levels = 4 + static_cast<int>(rng.Below(8));
  for (int i = 1; i <= levels; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    bomb += "bomb" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev;
    for (int k = 0; k < 9; ++k) bomb += ", " + prev;
    bomb += "]\n";
  }
  return bomb + text;
}

std::string RepeatBomb(const std::string& text, Random& rng) {
  const std::vector<std::string> counts = {
      "1000000000", "262145", "-1", "99999999999999999999", "\"${2 * 1000000000}\"", "x"};
  const size_t at = text.find("repeat: ");
  if (at != std::string::npos) return ReplaceValue(text, at + 8, rng.Pick(counts));
  // Nested repeats of 1024 three deep: 2^30 layers.
  return "blocks:\n"
         "  b0: {layers: [{name: r, type: relu}]}\n"
         "  b1: {layers: [{name: x, block: b0, repeat: 1024}]}\n"
         "  b2: {layers: [{name: x, block: b1, repeat: 1024}]}\n"
         "layers:\n"
         "  - {name: data, type: input, shape: [1, 2, 2]}\n"
         "  - {name: y, block: b2, repeat: 1024}\n";
}

}  // namespace

uint64_t Random::Next() {
  // splitmix64: small, fast, and the same on every platform.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const char* TextMutationName(TextMutation m) {
  static const char* const kNames[] = {
      "truncate",      "delete line", "duplicate line", "swap lines", "extreme number",
      "swap type",     "bad bytes",   "deep nesting",   "expression", "cycle",
      "duplicate key", "repeat bomb", "alias bomb"};
  return kNames[static_cast<int>(m)];
}

std::string MutateText(const std::string& text, TextMutation m, Random& rng) {
  std::vector<std::string> lines = Lines(text);
  switch (m) {
    case TextMutation::kTruncate:
      return text.substr(0, rng.Below(text.size() + 1));
    case TextMutation::kDeleteLine:
      if (!lines.empty()) lines.erase(lines.begin() + rng.Below(lines.size()));
      return Join(lines);
    case TextMutation::kDuplicateLine:
      if (!lines.empty()) {
        const size_t i = rng.Below(lines.size());
        lines.insert(lines.begin() + i, lines[i]);
      }
      return Join(lines);
    case TextMutation::kSwapLines:
      if (lines.size() > 1)
        std::swap(lines[rng.Below(lines.size())], lines[rng.Below(lines.size())]);
      return Join(lines);
    case TextMutation::kExtremeNumber:
      return ReplaceRandomValue(text, rng.Pick(kExtremeNumbers), rng);
    case TextMutation::kSwapType:
      return ReplaceRandomValue(text, rng.Pick(kOtherTypes), rng);
    case TextMutation::kBadBytes: {
      std::string out = text;
      const int count = 1 + static_cast<int>(rng.Below(4));
      for (int i = 0; i < count; ++i) out.insert(rng.Below(out.size() + 1), rng.Pick(kBadBytes));
      return out;
    }
    case TextMutation::kDeepNesting:
      return DeepNesting(text, rng);
    case TextMutation::kExpression:
      return ReplaceRandomValue(text, rng.Pick(kExpressions), rng);
    case TextMutation::kCycle:
      return Cycle(text, rng);
    case TextMutation::kDuplicateKey:
      return DuplicateKey(text, rng);
    case TextMutation::kRepeatBomb:
      return RepeatBomb(text, rng);
    case TextMutation::kAliasBomb:
      return AliasBomb(text, rng);
    case TextMutation::kCount:
      break;
  }
  return text;
}

const char* ByteMutationName(ByteMutation m) {
  static const char* const kNames[] = {"truncate", "flip bytes", "header word", "append",
                                       "zero run"};
  return kNames[static_cast<int>(m)];
}

std::vector<uint8_t> MutateBytes(const std::vector<uint8_t>& bytes, ByteMutation m, size_t header,
                                 Random& rng) {
  std::vector<uint8_t> out = bytes;
  switch (m) {
    case ByteMutation::kTruncate:
      out.resize(rng.Below(out.size() + 1));
      break;
    case ByteMutation::kFlipBytes: {
      const int count = 1 + static_cast<int>(rng.Below(8));
      for (int i = 0; i < count && !out.empty(); ++i) {
        out[rng.Below(out.size())] ^= static_cast<uint8_t>(1 + rng.Below(255));
      }
      break;
    }
    case ByteMutation::kHeaderWord: {
      static const uint32_t kWords[] = {0,           1,        0xFFFFFFFFu, 0x7FFFFFFFu,
                                        0x80000000u, 0x10000u, 0x10001u,    28};
      const size_t words = std::max<size_t>(1, std::min(header, out.size()) / 4);
      const size_t at = 4 * rng.Below(words);
      const uint32_t w = kWords[rng.Below(sizeof(kWords) / sizeof(kWords[0]))];
      for (int b = 0; b < 4 && at + b < out.size(); ++b) out[at + b] = (w >> (24 - 8 * b)) & 0xff;
      break;
    }
    case ByteMutation::kAppend: {
      const size_t count = 1 + rng.Below(5000);
      for (size_t i = 0; i < count; ++i) out.push_back(static_cast<uint8_t>(rng.Next()));
      break;
    }
    case ByteMutation::kZeroRun: {
      if (out.empty()) break;
      const size_t start = rng.Below(out.size());
      const size_t length = std::min(out.size() - start, 1 + rng.Below(64));
      std::fill(out.begin() + start, out.begin() + start + length, 0);
      break;
    }
    case ByteMutation::kCount:
      break;
  }
  return out;
}

}  // namespace fuzz
}  // namespace spill
