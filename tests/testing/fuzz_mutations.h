// Mutations for the fuzz test: seeded and deterministic, so a failing case
// is reproduced by its seed and number alone.
//
// Text mutations (YAML networks and configs) are the classes of hostile input
// seen in practice: truncation, deleted, duplicated and swapped lines, extreme
// numbers, type swaps, bad bytes, deep nesting, arithmetic traps, cycles,
// duplicate keys, repeat bombs and alias bombs. Byte mutations (datasets,
// checkpoints) truncate, flip, zero, append and rewrite header words.
#ifndef SPILL_TESTS_TESTING_FUZZ_MUTATIONS_H_
#define SPILL_TESTS_TESTING_FUZZ_MUTATIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spill {
namespace fuzz {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, n); n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }

 private:
  uint64_t state_;
};

enum class TextMutation {
  kTruncate,
  kDeleteLine,
  kDuplicateLine,
  kSwapLines,
  kExtremeNumber,
  kSwapType,
  kBadBytes,
  kDeepNesting,
  kExpression,
  kCycle,
  kDuplicateKey,
  kRepeatBomb,
  kAliasBomb,
  kCount,
};
const char* TextMutationName(TextMutation m);
std::string MutateText(const std::string& text, TextMutation m, Random& rng);

enum class ByteMutation {
  kTruncate,
  kFlipBytes,
  kHeaderWord,  // a big-endian 32-bit word of the first `header` bytes
  kAppend,
  kZeroRun,
  kCount,
};
const char* ByteMutationName(ByteMutation m);
std::vector<uint8_t> MutateBytes(const std::vector<uint8_t>& bytes, ByteMutation m, size_t header,
                                 Random& rng);

}  // namespace fuzz
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_FUZZ_MUTATIONS_H_
