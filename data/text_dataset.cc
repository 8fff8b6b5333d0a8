// Character-level text (data/dataset.h, OpenCharText). Policy: read the
// whole corpus at open (a file, or a folder's text files in name order),
// choose the vocabulary over all of it, map every byte to its id once and
// keep only the split's ids; Get and GetPixelLabels copy one window out of
// them. Every bad input - a missing path, an empty corpus, a split too short
// for one window, an out-of-range option, a byte outside a given vocabulary
// - is an error naming the file, never an abort. Corpora are megabytes; the
// ceiling below only keeps a wrong path (a disk image) from filling memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/io.h"

namespace spill {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxSequence = int64_t{1} << 20;       // symbols per example
constexpr int64_t kMaxStreams = int64_t{1} << 24;        // streams (the batch)
constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 30;  // 1 GiB, the whole corpus
constexpr double kMaxTestFraction = 0.5;
constexpr int kByteValues = 256;
constexpr int kNotASymbol = -1;
constexpr char kIndexSuffix[] = ".dat";  // strfile's index files beside fortunes

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Hex(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%02x", value);
  return text;
}

// The corpus's bytes and where each of its files starts in them.
struct Corpus {
  std::vector<uint8_t> bytes;
  std::vector<std::pair<std::string, uint64_t>> files;  // path, first byte
};

// Sorted names of the text files directly in `dir`: regular files, not
// symbolic links, hidden names or strfile's .dat indexes.
StatusOr<std::vector<std::string>> ListTextFiles(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || EndsWith(name, kIndexSuffix)) continue;
    std::error_code type_error;
    const fs::file_status status = it->symlink_status(type_error);
    if (!type_error && fs::is_regular_file(status)) names.push_back(name);
  }
  if (error) return IoError("cannot list " + dir + ": " + error.message());
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<Corpus> ReadCorpus(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status)) {
    return NotFound(path + " does not exist; expected a text file or a folder of text files " +
                    "(e.g. /usr/share/games/fortunes of Debian's fortunes package)");
  }
  std::vector<std::string> paths = {path};
  if (fs::is_directory(status)) {
    SPILL_ASSIGN_OR_RETURN(std::vector<std::string> names, ListTextFiles(path));
    if (names.empty()) {
      return InvalidArgument(path + " holds no text files; expected regular files directly in " +
                             "it (symbolic links, subfolders and .dat files are skipped)");
    }
    paths.clear();
    for (const std::string& name : names) paths.push_back(JoinPath(path, name));
  }
  Corpus corpus;
  for (const std::string& file : paths) {
    corpus.files.emplace_back(file, corpus.bytes.size());
    // A file past the ceiling is an error naming it and the bytes left for it.
    SPILL_RETURN_IF_ERROR(AppendFile(file, &corpus.bytes, kMaxCorpusBytes - corpus.bytes.size()));
  }
  if (corpus.bytes.empty()) {
    return InvalidArgument(path + (paths.size() > 1 ? ": its text files are empty" : " is empty") +
                           "; expected text");
  }
  return corpus;
}

Status CheckOptions(const TextOptions& o) {
  if (o.sequence < 1 || o.sequence > kMaxSequence) {
    return InvalidArgument(o.path + ": sequence " + std::to_string(o.sequence) +
                           " is outside [1, " + std::to_string(kMaxSequence) + "]");
  }
  if (!(o.test_fraction > 0 && o.test_fraction <= kMaxTestFraction)) {  // NaN fails too
    char fraction[32];
    std::snprintf(fraction, sizeof(fraction), "%g", o.test_fraction);
    return InvalidArgument(o.path + ": test_fraction " + fraction + " is outside (0, 0.5]");
  }
  if (o.streams < 0 || o.streams > kMaxStreams) {
    return InvalidArgument(o.path + ": streams " + std::to_string(o.streams) + " is outside [0, " +
                           std::to_string(kMaxStreams) + "] (0: no streams)");
  }
  return Status::Ok();
}

// The sorted distinct values of `bytes`.
std::vector<uint8_t> DistinctBytes(const std::vector<uint8_t>& bytes) {
  bool seen[kByteValues] = {};
  for (uint8_t b : bytes) seen[b] = true;
  std::vector<uint8_t> symbols;
  for (int v = 0; v < kByteValues; ++v) {
    if (seen[v]) symbols.push_back(static_cast<uint8_t>(v));
  }
  return symbols;
}

// Replaces every byte of the corpus by its symbol's id; `vocabulary` names
// the file the symbols came from ("" = the corpus itself).
Status MapToIds(const std::vector<uint8_t>& symbols, const std::string& vocabulary,
                Corpus* corpus) {
  int id_of[kByteValues];
  std::fill(id_of, id_of + kByteValues, kNotASymbol);
  for (size_t i = 0; i < symbols.size(); ++i) id_of[symbols[i]] = static_cast<int>(i);
  std::vector<uint8_t>& bytes = corpus->bytes;
  for (size_t f = 0; f < corpus->files.size(); ++f) {
    const uint64_t first = corpus->files[f].second;
    const uint64_t end = f + 1 < corpus->files.size() ? corpus->files[f + 1].second : bytes.size();
    for (uint64_t i = first; i < end; ++i) {
      const int id = id_of[bytes[i]];
      if (id == kNotASymbol) {
        return InvalidArgument(corpus->files[f].first + ": byte " + std::to_string(i - first) +
                               " is " + Hex(bytes[i]) + ", which is not in the vocabulary of " +
                               vocabulary);
      }
      bytes[i] = static_cast<uint8_t>(id);
    }
  }
  return Status::Ok();
}

class CharText : public Dataset {
 public:
  CharText(std::vector<uint8_t> ids, int classes, const TextOptions& options, Split split,
           int64_t stream_bytes)
      : ids_(std::move(ids)),
        classes_(classes),
        sequence_(options.sequence),
        streams_(options.streams),
        stream_bytes_(stream_bytes) {
    size_ = streams_ > 0 ? streams_ * (stream_bytes_ / sequence_)
                         : (static_cast<int64_t>(ids_.size()) - 1) / sequence_;
    description_ = "text " + options.path + " (" + (split == Split::kTrain ? "train" : "test") +
                   " split: " + std::to_string(ids_.size()) +
                   " bytes, V=" + std::to_string(classes_) +
                   " symbols, T=" + std::to_string(sequence_);
    if (streams_ > 0) {
      description_ += ", " + std::to_string(streams_) + " streams of " +
                      std::to_string(stream_bytes_) + " bytes";
    }
    description_ += ")";
  }

  int64_t size() const override { return size_; }
  int num_classes() const override { return classes_; }
  Shape example_shape() const override { return Shape(1, 1, 1, sequence_); }
  Shape label_shape() const override { return Shape(1, 1, 1, sequence_); }
  std::string Describe() const override { return description_; }

  StatusOr<int> Get(int64_t index, uint64_t, float* image) const override {
    SPILL_RETURN_IF_ERROR(CheckExampleIndex(index, size_, description_));
    const uint8_t* window = ids_.data() + Offset(index);
    for (int64_t t = 0; t < sequence_; ++t) image[t] = static_cast<float>(window[t]);
    return static_cast<int>(window[1]);
  }

  Status GetPixelLabels(int64_t index, float* labels) const override {
    SPILL_RETURN_IF_ERROR(CheckExampleIndex(index, size_, description_));
    const uint8_t* next = ids_.data() + Offset(index) + 1;
    for (int64_t t = 0; t < sequence_; ++t) labels[t] = static_cast<float>(next[t]);
    return Status::Ok();
  }

 private:
  // The first input byte of example `index` (see OpenCharText).
  int64_t Offset(int64_t index) const {
    if (streams_ == 0) return index * sequence_;
    return (index % streams_) * stream_bytes_ + (index / streams_) * sequence_;
  }

  std::vector<uint8_t> ids_;  // the split's symbol ids
  int classes_;
  int64_t sequence_;
  int64_t streams_;
  int64_t stream_bytes_;  // L, 0 without streams
  int64_t size_ = 0;
  std::string description_;
};

}  // namespace

StatusOr<std::vector<uint8_t>> ReadCharVocabulary(const std::string& path) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxCorpusBytes));
  if (bytes.empty()) {
    return InvalidArgument(path + " is empty; expected a vocabulary file, whose distinct bytes " +
                           "are the symbols");
  }
  return DistinctBytes(bytes);
}

StatusOr<std::unique_ptr<Dataset>> OpenCharText(const TextOptions& options, Split split) {
  SPILL_RETURN_IF_ERROR(CheckOptions(options));
  SPILL_ASSIGN_OR_RETURN(Corpus corpus, ReadCorpus(options.path));
  std::vector<uint8_t> symbols;
  if (options.vocabulary.empty()) {
    symbols = DistinctBytes(corpus.bytes);
  } else {
    SPILL_ASSIGN_OR_RETURN(symbols, ReadCharVocabulary(options.vocabulary));
  }
  SPILL_RETURN_IF_ERROR(MapToIds(symbols, options.vocabulary, &corpus));

  const int64_t total = static_cast<int64_t>(corpus.bytes.size());
  const int64_t test = static_cast<int64_t>(std::floor(total * options.test_fraction));
  const int64_t first = split == Split::kTrain ? 0 : total - test;
  const int64_t bytes = split == Split::kTrain ? total - test : test;
  const int64_t streams = std::max<int64_t>(options.streams, 1);
  const int64_t stream_bytes = (bytes - 1) / streams / options.sequence * options.sequence;
  if (bytes < 2 || stream_bytes < options.sequence) {
    const std::string window =
        "one window of " + std::to_string(options.sequence) + " symbols and the symbol after it";
    return InvalidArgument(
        options.path + ": the " + (split == Split::kTrain ? "training" : "test") + " split has " +
        std::to_string(bytes) + " bytes (of " + std::to_string(total) + "), too few for " +
        (options.streams > 0 ? std::to_string(options.streams) + " streams of " + window : window) +
        ": it needs " + std::to_string(streams * options.sequence + 1) + " bytes" +
        (split == Split::kTest ? " (raise test_fraction or lower sequence)" : ""));
  }
  std::vector<uint8_t> ids(corpus.bytes.begin() + first, corpus.bytes.begin() + first + bytes);
  return std::unique_ptr<Dataset>(new CharText(std::move(ids), static_cast<int>(symbols.size()),
                                               options, split,
                                               options.streams > 0 ? stream_bytes : 0));
}

}  // namespace spill
