// Sequence pairs for sequence-to-sequence models: (source, target) byte
// strings from one of three corpora, grouped into buckets by length and
// batched one bucket at a time, so that a batch is padded only to the length
// of its own bucket.
//
//   parallel text   two line-aligned files (the WMT/Europarl layout): pair i
//                   is line i of `source` and line i of `target`
//   catalogs        GNU gettext binary catalogs (.mo): pair = (msgid, msgstr)
//                   of every translated message
//   synthetic       `reverse` (target = source reversed) or `add` (source
//                   "123+45", target "168"), generated from a seed
//
// Symbols are bytes (as in OpenCharText). Ids:
//   0 <pad>, 1 <bos>, 2 <eos>, then 3 + the rank of a byte among the sorted
//   distinct bytes of both sides of the whole corpus (or of the
//   `vocabulary` file): one vocabulary for sources and targets, the same for
//   both splits; vocabulary_size() = 3 + symbols. There is no <unk>: a byte
//   outside a given vocabulary is an error naming the file, the line or
//   entry, and the byte.
//
// Lengths: a source of S bytes is S tokens (no <eos>: its end is where the
// padding starts); a target of T bytes is T + 1 tokens on the decoder's side
// (<bos> + target as its input, target + <eos> as its labels). A pair's
// length is max(S, T + 1); a pair longer than `max_length` is an error naming
// its file, line or entry and both lengths, unless `skip_longer` drops it.
//
// Everything is read and checked at open; EpochBatches and Fill only
// compute and copy, and are thread-safe.
#ifndef SPILL_DATA_PAIR_DATASET_H_
#define SPILL_DATA_PAIR_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "framework/base/status.h"

namespace spill {

// Reserved ids, before the symbols.
constexpr int kPadId = 0;
constexpr int kBosId = 1;
constexpr int kEosId = 2;
constexpr int kReservedIds = 3;

struct PairOptions {
  // Exactly one corpus: `source` and `target`, `catalogs` or `synthetic`.
  //
  // Line-aligned text files (gunzipped when a name ends in .gz). Lines end
  // at '\n' (a '\r' before it is dropped); a last line without '\n' counts.
  // A line empty on both sides is skipped; empty on one side only, and files
  // of different line counts, are errors naming both files.
  std::string source;
  std::string target;
  // .mo files, or folders: every regular *.mo file directly in a folder, in
  // name order (symbolic links, hidden names and subfolders are skipped).
  std::vector<std::string> catalogs;
  // "reverse" or "add": `synthetic_pairs` pairs whose sources are
  // synthetic_min_length..synthetic_max_length bytes (uniformly drawn;
  // `add` needs at least 3: "1+2"), pair i depending only on (seed, i).
  // reverse: lowercase letters; add: two decimal numbers without leading
  // zeros around '+', the target their sum.
  std::string synthetic;
  int64_t synthetic_pairs = 0;
  int64_t synthetic_min_length = 1;
  int64_t synthetic_max_length = 0;
  uint64_t seed = 0;

  // The longest pair kept, in tokens (see the header comment), 1..2^20.
  int64_t max_length = 0;
  // true: pairs longer than max_length are dropped and counted in
  // Describe(); false: they are errors.
  bool skip_longer = false;
  // The last floor(test_fraction * pairs) pairs, in corpus order, are the
  // test split, in [0, 1] (1: a corpus that is all test data, such as WMT's
  // newstest files - give those a `vocabulary` so its ids match training).
  // A split with no pairs is an error when opened.
  double test_fraction = 0.05;
  // A file whose distinct bytes are the symbols ("" = those of the corpus).
  std::string vocabulary;
  // OpenPairDataset: batches of one length bucket each, cut to its bound
  // (Dataset::BatchOrder, Dataset::length_buckets); false: every batch
  // padded to max_length.
  bool buckets = false;
  // Increasing bucket lengths, the last one max_length. Empty: four even
  // buckets, ceil(max_length * k / 4) for k = 1..4 (fewer when they
  // coincide, for max_length < 4).
  std::vector<int64_t> bucket_bounds;
};

// The pairs of one bucket that a step trains on together.
struct PairBatch {
  std::vector<int64_t> indices;  // pairs of the split, all in `bucket`
  int64_t bucket = 0;
  int64_t bound = 0;          // the bucket's bound: the length it pads to at most
  int64_t length = 0;         // the longest member's length, max(source, target)
  int64_t source_length = 0;  // the longest member's source, in tokens
  int64_t target_length = 0;  // the longest member's target + 1 (<bos>/<eos>)
};

class PairDataset {
 public:
  virtual ~PairDataset() = default;

  // Pairs in the split.
  virtual int64_t size() const = 0;
  // 3 reserved ids + the symbols.
  virtual int vocabulary_size() const = 0;
  // The byte of each symbol id (id 3 is symbols()[0]).
  virtual const std::vector<uint8_t>& symbols() const = 0;
  // Pair `index`'s source tokens and its target's tokens + 1, 0 <= index < size().
  virtual int64_t source_length(int64_t index) const = 0;
  virtual int64_t target_length(int64_t index) const = 0;
  // The bucket of pair `index`: the first whose bound is >= its length.
  virtual int64_t bucket(int64_t index) const = 0;
  virtual const std::vector<int64_t>& bucket_bounds() const = 0;
  // Pairs of either split dropped by skip_longer.
  virtual int64_t skipped() const = 0;
  virtual std::string Describe() const = 0;

  // The batches of one epoch, batch >= 1 pairs each: every pair of the split
  // exactly once, each batch from one bucket. Within a bucket pairs are
  // shuffled and cut into batches of `batch`; its last batch keeps the
  // remainder (fewer pairs, never dropped). The order of all batches is then
  // shuffled. Depends only on (the split, batch, seed).
  virtual StatusOr<std::vector<PairBatch>> EpochBatches(int64_t batch, uint64_t seed) const = 0;

  // Writes `batch` as N x 1 x 1 x T ids (as floats) in spill's sequence
  // layout, N = batch.indices.size(), row n for batch.indices[n]:
  //   source         N x t_source: the source's ids, then kPadId
  //   decoder_input  N x t_target: kBosId, the target's ids, then kPadId
  //   labels         N x t_target: the target's ids, kEosId, then
  //                  `ignore_label` (a value the loss skips, e.g. -1)
  // A t_source shorter than the longest member's source, or a t_target
  // shorter than its target + 1 (batch.source_length, batch.target_length for
  // the batches of EpochBatches; the members themselves are measured) is an
  // error, as is an index outside the split.
  virtual Status Fill(const PairBatch& batch, int64_t t_source, int64_t t_target,
                      float ignore_label, float* source, float* decoder_input,
                      float* labels) const = 0;
};

// Reads the corpus of `options`, checks it and returns `split`'s pairs.
StatusOr<std::unique_ptr<PairDataset>> OpenPairs(const PairOptions& options, Split split);

// The label of a padding position in OpenPairDataset's labels: a loss must
// leave it out (softmax_loss ignore_label: -1), and the trainer refuses a
// network whose loss does not.
constexpr int kPairPaddingLabel = -1;

// `split`'s pairs as a Dataset for a network of one input, every pair padded
// to T = options.max_length (no buckets: one shape for every batch). An
// example is 2 x 1 x T ids (as floats), the two sides packed in channels:
//   channel 0  the source's ids, then kPadId
//   channel 1  the decoder input: kBosId, the target's ids, then kPadId
// and its labels (label_shape 1 x 1 x 1 x T, GetPixelLabels) the target's
// ids, kEosId, then kPairPaddingLabel. A network slices the channels apart
// (slice begin/end); Get returns the first label. num_classes() is
// vocabulary_size(). Get and GetPixelLabels only copy, and are thread-safe.
//
// With options.buckets the dataset lists its length buckets and orders an
// epoch's examples as EpochBatches does: whole batches of one bucket, in
// random order, then the buckets' remainders together (the loader drops or
// keeps the last short batch as it is told).
StatusOr<std::unique_ptr<Dataset>> OpenPairDataset(const PairOptions& options, Split split);

// The length of a batch of `count` packed examples (2 x 1 x `width` ids,
// `width` labels each): past it every id is kPadId and every label
// kPairPaddingLabel, in every example.
int64_t PackedPairsLength(const std::vector<float>& images, const std::vector<float>& labels,
                          int64_t count, int64_t width);
// Cuts a batch of `count` packed examples from `width` positions to the
// first `length` (<= width), in place.
void CropPackedPairs(int64_t count, int64_t width, int64_t length, std::vector<float>* images,
                     std::vector<float>* labels);

// One message of a gettext catalog: its entry (0-based, in the catalog's
// order), the singular msgid without its context, the first msgstr.
struct MoMessage {
  int64_t entry = 0;
  std::string msgid;
  std::string msgstr;
};

// The translated messages of the .mo file at `path`, in entry order. The
// header (empty msgid) and untranslated entries (empty msgstr) are left out;
// a msgid "context\x04id" counts as "id"; plural entries ("one\0many",
// "form 0\0form 1\0...") give their singular msgid and first msgstr. Either
// byte order; every table and string is checked against the file's size: a
// bad magic number, a major revision other than 0 or 1, a table or string
// past the end is an error naming the file (and the entry).
StatusOr<std::vector<MoMessage>> ReadMoCatalog(const std::string& path);

}  // namespace spill

#endif  // SPILL_DATA_PAIR_DATASET_H_
