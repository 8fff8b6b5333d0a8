// Sequence pairs (data/pair_dataset.h, OpenPairs). Policy: read the whole
// corpus at open - two line-aligned files, gettext catalogs or a generated
// task - into byte-string pairs that remember where each came from (file and
// line, catalog and entry, or generated pair), apply max_length (an error or
// a drop), choose the vocabulary over every kept pair, map both sides to ids
// and keep only the split's. Every bad input is an error naming its file and
// line or entry, never an abort. Batching is pure arithmetic on the pairs'
// lengths: buckets are fixed at open; an epoch's batches are a function of
// (batch, seed), shuffled by counter-based random numbers
// (framework/base/random.h), so they are the same on every machine.
#include "data/pair_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/io.h"
#include "framework/base/random.h"
#include "framework/base/strings.h"

namespace spill {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxLength = int64_t{1} << 20;          // tokens per side
constexpr int64_t kMaxSyntheticPairs = int64_t{1} << 24;  // pairs
constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 30;   // 1 GiB per file, and generated
constexpr int kDefaultBuckets = 4;
constexpr int kByteValues = 256;
constexpr int kNotASymbol = -1;
constexpr char kCatalogSuffix[] = ".mo";
constexpr int kLetters = 26;  // reverse: 'a'..'z'
constexpr int kDigits = 10;
constexpr uint64_t kBucketStream = 1;  // MixSeed streams of an epoch's seed
constexpr uint64_t kOrderStream = 2;

std::string Hex(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%02x", value);
  return text;
}

std::string ListText(const std::vector<int64_t>& values) {
  std::vector<std::string> items;
  for (int64_t v : values) items.push_back(std::to_string(v));
  return "[" + Join(items) + "]";
}

// Uniform in [0, n) from the high half of a 64x64-bit product; n > 0.
uint64_t Below(uint64_t bits, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

// Fisher-Yates, each swap drawn from (seed, position).
template <typename T>
void Shuffle(uint64_t seed, std::vector<T>* items) {
  for (size_t i = items->size(); i > 1; --i) {
    std::swap((*items)[i - 1], (*items)[Below(MixSeed(seed, i - 1), i)]);
  }
}

// ---------------------------------------------------------------------------
// The corpus: byte-string pairs and where each came from.

enum class Kind { kText, kCatalogs, kSynthetic };

struct RawPair {
  std::string source;
  std::string target;
  int64_t file = 0;  // catalogs: index into Corpus::files
  int64_t at = 0;    // text: line (1-based); catalogs: entry; synthetic: pair
};

struct Corpus {
  Kind kind = Kind::kText;
  std::string label;               // the corpus, for messages
  std::vector<std::string> files;  // text: source, target; catalogs: one per file
  std::vector<RawPair> pairs;
};

// Where a pair (side -1) or one of its sides (0 source, 1 target) came from.
std::string Where(const Corpus& corpus, const RawPair& pair, int side) {
  const std::string at = std::to_string(pair.at);
  if (corpus.kind == Kind::kText) {
    if (side >= 0) return corpus.files[side] + ":" + at;
    return corpus.files[0] + ":" + at + " and " + corpus.files[1] + ":" + at;
  }
  const bool catalog = corpus.kind == Kind::kCatalogs;
  std::string where =
      catalog ? corpus.files[pair.file] + ": entry " + at : corpus.label + ": pair " + at;
  if (side == 0) where += catalog ? " (msgid)" : " (source)";
  if (side == 1) where += catalog ? " (msgstr)" : " (target)";
  return where;
}

std::string Label(const PairOptions& o) {
  if (!o.synthetic.empty()) {
    return "synthetic " + o.synthetic + " (seed " + std::to_string(o.seed) + ")";
  }
  if (!o.catalogs.empty()) return Join(o.catalogs);
  if (o.source.empty() && o.target.empty()) return "pair corpus";
  return o.source + ", " + o.target;
}

std::string Fraction(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// ---------------------------------------------------------------------------
// Options.

Status CheckCorpusChoice(const PairOptions& o, const std::string& label) {
  const int chosen =
      (!o.source.empty() || !o.target.empty()) + !o.catalogs.empty() + !o.synthetic.empty();
  if (chosen != 1) {
    return InvalidArgument(label + ": name exactly one corpus: source and target files, " +
                           "catalogs or synthetic (got " + std::to_string(chosen) + ")");
  }
  if (o.source.empty() != o.target.empty()) {
    return InvalidArgument(label + ": line-aligned text needs both a source and a target file");
  }
  if (o.synthetic.empty()) return Status::Ok();
  if (o.synthetic != "reverse" && o.synthetic != "add") {
    return InvalidArgument(label + ": unknown synthetic task '" + o.synthetic +
                           "' (known: reverse, add)");
  }
  const int64_t least = o.synthetic == "add" ? 3 : 1;  // "1+2"
  if (o.synthetic_min_length < least || o.synthetic_max_length < o.synthetic_min_length ||
      o.synthetic_max_length > kMaxLength) {
    return InvalidArgument(
        label + ": synthetic lengths [" + std::to_string(o.synthetic_min_length) + ", " +
        std::to_string(o.synthetic_max_length) + "] must satisfy " + std::to_string(least) +
        " <= min <= max <= " + std::to_string(kMaxLength));
  }
  if (o.synthetic_pairs < 1 || o.synthetic_pairs > kMaxSyntheticPairs ||
      static_cast<uint64_t>(o.synthetic_pairs) * o.synthetic_max_length > kMaxCorpusBytes) {
    return InvalidArgument(label + ": synthetic_pairs " + std::to_string(o.synthetic_pairs) +
                           " is outside [1, " + std::to_string(kMaxSyntheticPairs) +
                           "] or makes more than " + std::to_string(kMaxCorpusBytes) +
                           " source bytes");
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> BucketBounds(const PairOptions& o, const std::string& label) {
  std::vector<int64_t> bounds = o.bucket_bounds;
  if (bounds.empty()) {
    for (int64_t k = 1; k <= kDefaultBuckets; ++k) {
      const int64_t bound = (o.max_length * k + kDefaultBuckets - 1) / kDefaultBuckets;
      if (bounds.empty() || bound > bounds.back()) bounds.push_back(bound);
    }
    return bounds;
  }
  bool ok = bounds.front() >= 1 && bounds.back() == o.max_length;
  for (size_t i = 1; i < bounds.size(); ++i) ok = ok && bounds[i] > bounds[i - 1];
  if (!ok) {
    return InvalidArgument(label + ": bucket_bounds " + ListText(bounds) +
                           " must increase from at least 1 and end at max_length " +
                           std::to_string(o.max_length));
  }
  return bounds;
}

Status CheckOptions(const PairOptions& o, const std::string& label) {
  SPILL_RETURN_IF_ERROR(CheckCorpusChoice(o, label));
  if (o.max_length < 1 || o.max_length > kMaxLength) {
    return InvalidArgument(label + ": max_length " + std::to_string(o.max_length) +
                           " is outside [1, " + std::to_string(kMaxLength) + "]");
  }
  if (!(o.test_fraction >= 0 && o.test_fraction <= 1)) {  // NaN fails too
    return InvalidArgument(label + ": test_fraction " + Fraction(o.test_fraction) +
                           " is outside [0, 1]");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Line-aligned text.

// The lines of `path`: split at '\n', a '\r' before it dropped; a last line
// without '\n' counts, an empty file has none.
StatusOr<std::vector<std::string>> ReadLines(const std::string& path) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxCorpusBytes));
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = start;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    size_t stop = end > start && bytes[end - 1] == '\r' ? end - 1 : end;
    lines.emplace_back(reinterpret_cast<const char*>(bytes.data()) + start, stop - start);
    start = end + 1;
  }
  return lines;
}

StatusOr<Corpus> ReadParallelText(const PairOptions& o, Corpus corpus) {
  corpus.files = {o.source, o.target};
  SPILL_ASSIGN_OR_RETURN(std::vector<std::string> sources, ReadLines(o.source));
  SPILL_ASSIGN_OR_RETURN(std::vector<std::string> targets, ReadLines(o.target));
  if (sources.size() != targets.size()) {
    const bool source_shorter = sources.size() < targets.size();
    return InvalidArgument(o.source + " has " + std::to_string(sources.size()) + " lines and " +
                           o.target + " has " + std::to_string(targets.size()) +
                           "; line-aligned files need as many lines each (" +
                           (source_shorter ? o.source : o.target) + " ran out first, after line " +
                           std::to_string(std::min(sources.size(), targets.size())) + ")");
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty() && targets[i].empty()) continue;
    RawPair pair{std::move(sources[i]), std::move(targets[i]), 0, static_cast<int64_t>(i) + 1};
    if (pair.source.empty() || pair.target.empty()) {
      const int empty = pair.source.empty() ? 0 : 1;
      return InvalidArgument(Where(corpus, pair, empty) + " is empty but " +
                             Where(corpus, pair, 1 - empty) +
                             " is not; a pair needs both sides (lines empty on both are skipped)");
    }
    corpus.pairs.push_back(std::move(pair));
  }
  return corpus;
}

// ---------------------------------------------------------------------------
// Catalogs.

bool IsCatalogName(const std::string& name) {
  const size_t suffix = sizeof(kCatalogSuffix) - 1;
  return name.size() > suffix && name[0] != '.' &&
         name.compare(name.size() - suffix, suffix, kCatalogSuffix) == 0;
}

// `entry` itself, or the sorted regular *.mo files directly in it.
StatusOr<std::vector<std::string>> CatalogFiles(const std::string& entry) {
  std::error_code error;
  if (!fs::is_directory(entry, error)) return std::vector<std::string>{entry};
  std::vector<std::string> names;
  for (fs::directory_iterator it(entry, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    std::error_code type_error;
    const fs::file_status status = it->symlink_status(type_error);
    if (IsCatalogName(name) && !type_error && fs::is_regular_file(status)) names.push_back(name);
  }
  if (error) return IoError("cannot list " + entry + ": " + error.message());
  if (names.empty()) {
    return InvalidArgument(entry + " holds no .mo files; expected gettext catalogs directly in " +
                           "it (e.g. /usr/share/locale/fr/LC_MESSAGES)");
  }
  std::sort(names.begin(), names.end());
  for (std::string& name : names) name = JoinPath(entry, name);
  return names;
}

StatusOr<Corpus> ReadCatalogs(const PairOptions& o, Corpus corpus) {
  for (const std::string& entry : o.catalogs) {
    SPILL_ASSIGN_OR_RETURN(std::vector<std::string> files, CatalogFiles(entry));
    corpus.files.insert(corpus.files.end(), files.begin(), files.end());
  }
  for (size_t f = 0; f < corpus.files.size(); ++f) {
    SPILL_ASSIGN_OR_RETURN(std::vector<MoMessage> messages, ReadMoCatalog(corpus.files[f]));
    for (MoMessage& m : messages) {
      corpus.pairs.push_back(
          RawPair{std::move(m.msgid), std::move(m.msgstr), static_cast<int64_t>(f), m.entry});
    }
  }
  return corpus;
}

// ---------------------------------------------------------------------------
// Synthetic tasks: pair i from (seed, i) alone.

class Draws {
 public:
  explicit Draws(uint64_t seed) : seed_(seed) {}
  // Uniform in [low, high].
  int64_t In(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(Below(MixSeed(seed_, next_++), high - low + 1));
  }

 private:
  uint64_t seed_;
  uint64_t next_ = 0;
};

// A decimal number of `digits` digits, without leading zeros.
std::string Number(int64_t digits, Draws* draws) {
  std::string text;
  for (int64_t d = 0; d < digits; ++d) {
    const bool lead = d == 0 && digits > 1;
    text.push_back(static_cast<char>('0' + draws->In(lead ? 1 : 0, kDigits - 1)));
  }
  return text;
}

std::string AddDecimal(const std::string& a, const std::string& b) {
  std::string sum;
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int digit = carry;
    if (i < a.size()) digit += a[a.size() - 1 - i] - '0';
    if (i < b.size()) digit += b[b.size() - 1 - i] - '0';
    sum.push_back(static_cast<char>('0' + digit % kDigits));
    carry = digit / kDigits;
  }
  std::reverse(sum.begin(), sum.end());
  return sum;
}

RawPair SyntheticPair(const PairOptions& o, int64_t index) {
  Draws draws(MixSeed(o.seed, static_cast<uint64_t>(index)));
  const int64_t length = draws.In(o.synthetic_min_length, o.synthetic_max_length);
  RawPair pair;
  pair.at = index;
  if (o.synthetic == "reverse") {
    for (int64_t i = 0; i < length; ++i) {
      pair.source.push_back(static_cast<char>('a' + draws.In(0, kLetters - 1)));
    }
    pair.target.assign(pair.source.rbegin(), pair.source.rend());
    return pair;
  }
  const int64_t left = draws.In(1, length - 2);  // digits; the right number has the rest
  const std::string a = Number(left, &draws);
  const std::string b = Number(length - 1 - left, &draws);
  pair.source = a + "+" + b;
  pair.target = AddDecimal(a, b);
  return pair;
}

Corpus Synthesize(const PairOptions& o, Corpus corpus) {
  corpus.pairs.reserve(o.synthetic_pairs);
  for (int64_t i = 0; i < o.synthetic_pairs; ++i) corpus.pairs.push_back(SyntheticPair(o, i));
  return corpus;
}

StatusOr<Corpus> ReadCorpus(const PairOptions& o, const std::string& label) {
  Corpus corpus;
  corpus.label = label;
  if (!o.synthetic.empty()) {
    corpus.kind = Kind::kSynthetic;
    return Synthesize(o, std::move(corpus));
  }
  if (!o.catalogs.empty()) {
    corpus.kind = Kind::kCatalogs;
    SPILL_ASSIGN_OR_RETURN(corpus, ReadCatalogs(o, std::move(corpus)));
  } else {
    SPILL_ASSIGN_OR_RETURN(corpus, ReadParallelText(o, std::move(corpus)));
  }
  if (corpus.pairs.empty()) {
    return InvalidArgument(label + ": no pairs" +
                           (corpus.kind == Kind::kCatalogs
                                ? " (no entry has both a msgid and a msgstr)"
                                : " (the files hold no non-empty lines)"));
  }
  return corpus;
}

// ---------------------------------------------------------------------------
// Lengths and ids.

int64_t PairLength(const RawPair& pair) {
  return std::max<int64_t>(pair.source.size(), static_cast<int64_t>(pair.target.size()) + 1);
}

// Drops (skip_longer) or refuses pairs longer than max_length; returns the
// number dropped.
StatusOr<int64_t> ApplyMaxLength(const PairOptions& o, Corpus* corpus) {
  std::vector<RawPair>& pairs = corpus->pairs;
  size_t kept = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    RawPair& pair = pairs[i];
    if (PairLength(pair) <= o.max_length) {
      if (kept != i) pairs[kept] = std::move(pair);
      ++kept;
      continue;
    }
    if (o.skip_longer) continue;
    return InvalidArgument(Where(*corpus, pair, -1) + ": the source is " +
                           std::to_string(pair.source.size()) + " tokens and the target " +
                           std::to_string(pair.target.size() + 1) + " (with <eos>), " +
                           "longer than max_length " + std::to_string(o.max_length) +
                           " (raise max_length, or set skip_longer to drop such pairs)");
  }
  const int64_t skipped = static_cast<int64_t>(pairs.size()) - kept;
  pairs.resize(kept);
  if (pairs.empty()) {
    return InvalidArgument(corpus->label + ": all " + std::to_string(skipped) +
                           " pairs are longer than max_length " + std::to_string(o.max_length));
  }
  return skipped;
}

std::vector<uint8_t> DistinctBytes(const std::vector<RawPair>& pairs) {
  bool seen[kByteValues] = {};
  for (const RawPair& pair : pairs) {
    for (unsigned char c : pair.source) seen[c] = true;
    for (unsigned char c : pair.target) seen[c] = true;
  }
  std::vector<uint8_t> symbols;
  for (int v = 0; v < kByteValues; ++v) {
    if (seen[v]) symbols.push_back(static_cast<uint8_t>(v));
  }
  return symbols;
}

// One side of the split's pairs: ids, pair i at [offsets[i], offsets[i+1]).
struct Side {
  std::vector<uint16_t> ids;
  std::vector<int64_t> offsets = {0};
  int64_t length(int64_t i) const { return offsets[i + 1] - offsets[i]; }
};

class IdMap {
 public:
  IdMap(const std::vector<uint8_t>& symbols, std::string vocabulary)
      : vocabulary_(std::move(vocabulary)) {
    std::fill(id_of_, id_of_ + kByteValues, kNotASymbol);
    for (size_t i = 0; i < symbols.size(); ++i) {
      id_of_[symbols[i]] = kReservedIds + static_cast<int>(i);
    }
  }

  // Ok when every byte of every pair has an id.
  Status Check(const Corpus& corpus) const {
    for (const RawPair& pair : corpus.pairs) {
      for (int side = 0; side < 2; ++side) {
        const std::string& text = side == 0 ? pair.source : pair.target;
        for (size_t i = 0; i < text.size(); ++i) {
          const uint8_t byte = static_cast<uint8_t>(text[i]);
          if (id_of_[byte] != kNotASymbol) continue;
          return InvalidArgument(Where(corpus, pair, side) + ": byte " + std::to_string(i) +
                                 " is " + Hex(byte) + ", which is not in the vocabulary of " +
                                 vocabulary_);
        }
      }
    }
    return Status::Ok();
  }

  void Append(const std::string& text, Side* side) const {
    for (unsigned char c : text) side->ids.push_back(static_cast<uint16_t>(id_of_[c]));
    side->offsets.push_back(side->ids.size());
  }

 private:
  std::string vocabulary_;
  int id_of_[kByteValues];
};

// ---------------------------------------------------------------------------
// The dataset.

class PairSet : public PairDataset {
 public:
  PairSet(std::vector<uint8_t> symbols, Side source, Side target, std::vector<int64_t> bounds,
          int64_t skipped, std::string label)
      : symbols_(std::move(symbols)),
        source_(std::move(source)),
        target_(std::move(target)),
        bounds_(std::move(bounds)),
        skipped_(skipped),
        label_(std::move(label)) {
    members_.resize(bounds_.size());
    for (int64_t i = 0; i < size(); ++i) {
      const int64_t length = std::max(source_length(i), target_length(i));
      const int64_t b = std::lower_bound(bounds_.begin(), bounds_.end(), length) - bounds_.begin();
      buckets_.push_back(b);
      members_[b].push_back(i);
    }
  }

  int64_t size() const override { return static_cast<int64_t>(source_.offsets.size()) - 1; }
  int vocabulary_size() const override { return kReservedIds + static_cast<int>(symbols_.size()); }
  const std::vector<uint8_t>& symbols() const override { return symbols_; }
  int64_t source_length(int64_t i) const override { return source_.length(i); }
  int64_t target_length(int64_t i) const override { return target_.length(i) + 1; }
  int64_t bucket(int64_t i) const override { return buckets_[i]; }
  const std::vector<int64_t>& bucket_bounds() const override { return bounds_; }
  int64_t skipped() const override { return skipped_; }
  std::string Describe() const override { return description_; }

  void SetDescription(Split split, int64_t max_length) {
    std::vector<int64_t> counts;
    for (const auto& m : members_) counts.push_back(static_cast<int64_t>(m.size()));
    description_ = "pairs " + label_ + " (" + (split == Split::kTrain ? "train" : "test") +
                   " split: " + std::to_string(size()) +
                   " pairs, V=" + std::to_string(vocabulary_size()) + " ids (3 reserved + " +
                   std::to_string(symbols_.size()) + " bytes), max_length " +
                   std::to_string(max_length) + ", buckets " + ListText(bounds_) + " holding " +
                   ListText(counts) + " pairs";
    if (skipped_ > 0) description_ += "; " + std::to_string(skipped_) + " longer pairs skipped";
    description_ += ")";
  }

  StatusOr<std::vector<PairBatch>> EpochBatches(int64_t batch, uint64_t seed) const override {
    if (batch < 1) {
      return InvalidArgument(label_ + ": batch " + std::to_string(batch) + " must be at least 1");
    }
    std::vector<PairBatch> batches;
    for (size_t b = 0; b < members_.size(); ++b) {
      std::vector<int64_t> order = members_[b];
      Shuffle(MixSeed(MixSeed(seed, kBucketStream), b), &order);
      for (size_t first = 0; first < order.size(); first += batch) {
        const size_t end = std::min(order.size(), first + static_cast<size_t>(batch));
        batches.push_back(
            MakeBatch(b, std::vector<int64_t>(order.begin() + first, order.begin() + end)));
      }
    }
    Shuffle(MixSeed(seed, kOrderStream), &batches);
    return batches;
  }

  Status Fill(const PairBatch& batch, int64_t t_source, int64_t t_target, float ignore_label,
              float* source, float* decoder_input, float* labels) const override {
    SPILL_RETURN_IF_ERROR(CheckFill(batch, t_source, t_target));
    for (size_t n = 0; n < batch.indices.size(); ++n) {
      const int64_t i = batch.indices[n];
      FillSource(i, t_source, source + n * t_source);
      FillTarget(i, t_target, ignore_label, decoder_input + n * t_target, labels + n * t_target);
    }
    return Status::Ok();
  }

 private:
  PairBatch MakeBatch(int64_t bucket, std::vector<int64_t> indices) const {
    PairBatch batch;
    batch.bucket = bucket;
    batch.bound = bounds_[bucket];
    for (int64_t i : indices) {
      batch.source_length = std::max(batch.source_length, source_length(i));
      batch.target_length = std::max(batch.target_length, target_length(i));
    }
    batch.length = std::max(batch.source_length, batch.target_length);
    batch.indices = std::move(indices);
    return batch;
  }

  // The indices are the split's and t_source, t_target hold every member.
  Status CheckFill(const PairBatch& batch, int64_t t_source, int64_t t_target) const {
    int64_t longest_source = 0, longest_target = 0;
    for (int64_t i : batch.indices) {
      SPILL_RETURN_IF_ERROR(CheckExampleIndex(i, size(), Describe()));
      longest_source = std::max(longest_source, source_length(i));
      longest_target = std::max(longest_target, target_length(i));
    }
    if (t_source < longest_source || t_target < longest_target) {
      return InvalidArgument(label_ + ": a batch whose longest source is " +
                             std::to_string(longest_source) + " tokens and longest target " +
                             std::to_string(longest_target) + " (with <bos>/<eos>) does not fit " +
                             "T_source " + std::to_string(t_source) + " and T_target " +
                             std::to_string(t_target));
    }
    return Status::Ok();
  }

  void FillSource(int64_t i, int64_t t_source, float* row) const {
    const int64_t length = source_.length(i);
    const uint16_t* ids = source_.ids.data() + source_.offsets[i];
    for (int64_t t = 0; t < t_source; ++t) row[t] = t < length ? ids[t] : kPadId;
  }

  void FillTarget(int64_t i, int64_t t_target, float ignore_label, float* input,
                  float* labels) const {
    const int64_t length = target_.length(i);
    const uint16_t* ids = target_.ids.data() + target_.offsets[i];
    for (int64_t t = 0; t < t_target; ++t) {
      input[t] = t == 0 ? kBosId : t <= length ? ids[t - 1] : kPadId;
      labels[t] = t < length ? ids[t] : t == length ? kEosId : ignore_label;
    }
  }

  std::vector<uint8_t> symbols_;
  Side source_;
  Side target_;
  std::vector<int64_t> bounds_;
  std::vector<int64_t> buckets_;               // per pair
  std::vector<std::vector<int64_t>> members_;  // per bucket, pairs in order
  int64_t skipped_;
  std::string label_;
  std::string description_;
};

// OpenPairDataset's examples: each pair filled alone at T = max_length.
class PackedPairs : public Dataset {
 public:
  PackedPairs(std::unique_ptr<PairDataset> pairs, int64_t max_length, bool buckets)
      : pairs_(std::move(pairs)), length_(max_length), buckets_(buckets) {
    description_ = pairs_->Describe() + ", packed as 2 x 1 x " + std::to_string(length_) +
                   " (source, decoder input)";
  }

  int64_t size() const override { return pairs_->size(); }
  int num_classes() const override { return pairs_->vocabulary_size(); }
  Shape example_shape() const override { return Shape(1, 2, 1, length_); }
  Shape label_shape() const override { return Shape(1, 1, 1, length_); }
  std::string Describe() const override { return description_; }

  StatusOr<int> Get(int64_t index, uint64_t, float* image) const override {
    std::vector<float> labels(length_);
    SPILL_RETURN_IF_ERROR(Fill(index, image, labels.data()));
    return static_cast<int>(labels[0]);
  }

  Status GetPixelLabels(int64_t index, float* labels) const override {
    std::vector<float> image(2 * length_);
    return Fill(index, image.data(), labels);
  }

  std::vector<int64_t> length_buckets() const override {
    return buckets_ ? pairs_->bucket_bounds() : std::vector<int64_t>{};
  }

  std::vector<int64_t> BatchOrder(int64_t batch, uint64_t seed) const override {
    if (!buckets_) return {};
    auto batches = pairs_->EpochBatches(batch, seed);
    SPILL_CHECK(batches.ok()) << batches.status().ToString();  // the loader's batch is >= 1
    std::vector<int64_t> order, remainders;
    for (const PairBatch& b : *batches) {
      std::vector<int64_t>& into =
          static_cast<int64_t>(b.indices.size()) == batch ? order : remainders;
      into.insert(into.end(), b.indices.begin(), b.indices.end());
    }
    order.insert(order.end(), remainders.begin(), remainders.end());
    return order;
  }

 private:
  Status Fill(int64_t index, float* image, float* labels) const {
    PairBatch one;
    one.indices = {index};
    return pairs_->Fill(one, length_, length_, static_cast<float>(kPairPaddingLabel), image,
                        image + length_, labels);
  }

  std::unique_ptr<PairDataset> pairs_;
  int64_t length_;
  bool buckets_;
  std::string description_;
};

}  // namespace

StatusOr<std::unique_ptr<Dataset>> OpenPairDataset(const PairOptions& options, Split split) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<PairDataset> pairs, OpenPairs(options, split));
  return std::unique_ptr<Dataset>(
      new PackedPairs(std::move(pairs), options.max_length, options.buckets));
}

int64_t PackedPairsLength(const std::vector<float>& images, const std::vector<float>& labels,
                          int64_t count, int64_t width) {
  int64_t length = 0;
  for (int64_t n = 0; n < count; ++n) {
    for (int64_t t = width - 1; t >= length; --t) {
      const float* example = images.data() + n * 2 * width;
      if (example[t] != kPadId || example[width + t] != kPadId ||
          labels[n * width + t] != kPairPaddingLabel) {
        length = t + 1;
        break;
      }
    }
  }
  return length;
}

void CropPackedPairs(int64_t count, int64_t width, int64_t length, std::vector<float>* images,
                     std::vector<float>* labels) {
  SPILL_CHECK(length >= 1 && length <= width) << length << " of " << width;
  // Row r of the cut batch comes from row r of the whole one, never later in
  // memory: in place, front to back.
  for (int64_t row = 0; row < 2 * count; ++row) {
    std::memmove(images->data() + row * length, images->data() + row * width,
                 length * sizeof(float));
  }
  for (int64_t n = 0; n < count; ++n) {
    std::memmove(labels->data() + n * length, labels->data() + n * width, length * sizeof(float));
  }
  images->resize(2 * count * length);
  labels->resize(count * length);
}

StatusOr<std::unique_ptr<PairDataset>> OpenPairs(const PairOptions& options, Split split) {
  const std::string label = Label(options);
  SPILL_RETURN_IF_ERROR(CheckOptions(options, label));
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> bounds, BucketBounds(options, label));
  SPILL_ASSIGN_OR_RETURN(Corpus corpus, ReadCorpus(options, label));
  SPILL_ASSIGN_OR_RETURN(int64_t skipped, ApplyMaxLength(options, &corpus));
  std::vector<uint8_t> symbols;
  if (options.vocabulary.empty()) {
    symbols = DistinctBytes(corpus.pairs);
  } else {
    SPILL_ASSIGN_OR_RETURN(symbols, ReadCharVocabulary(options.vocabulary));
  }
  const IdMap ids(symbols, options.vocabulary);
  SPILL_RETURN_IF_ERROR(ids.Check(corpus));

  const int64_t total = static_cast<int64_t>(corpus.pairs.size());
  const int64_t test = static_cast<int64_t>(std::floor(total * options.test_fraction));
  const int64_t first = split == Split::kTrain ? 0 : total - test;
  const int64_t count = split == Split::kTrain ? total - test : test;
  if (count == 0) {
    return InvalidArgument(label + ": the " + (split == Split::kTrain ? "training" : "test") +
                           " split has no pairs (" + std::to_string(total) +
                           " pairs in all, test_fraction " + Fraction(options.test_fraction) + ")");
  }
  Side source, target;
  for (int64_t i = first; i < first + count; ++i) {
    ids.Append(corpus.pairs[i].source, &source);
    ids.Append(corpus.pairs[i].target, &target);
  }
  auto set = std::make_unique<PairSet>(std::move(symbols), std::move(source), std::move(target),
                                       std::move(bounds), skipped, label);
  set->SetDescription(split, options.max_length);
  return std::unique_ptr<PairDataset>(std::move(set));
}

}  // namespace spill
