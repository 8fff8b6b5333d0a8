// Character-level text (OpenCharText) on small files written here: the ids
// and next-symbol labels of a window, the vocabulary (the corpus's sorted
// bytes, or a vocabulary file's), a folder read in name order without .dat
// files, symbolic links or subfolders, the byte split, the stream layout for
// truncated back-propagation through time, batches through the loader, and
// every bad input an error naming its file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "tests/testing/data_files.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteTextFile;

TextOptions Options(const std::string& path, int64_t sequence) {
  TextOptions options;
  options.path = path;
  options.sequence = sequence;
  return options;
}

std::unique_ptr<Dataset> Open(const TextOptions& options, Split split = Split::kTrain) {
  auto data = OpenCharText(options, split);
  EXPECT_TRUE(data.ok()) << data.status().ToString();
  return data.ok() ? std::move(data).value() : nullptr;
}

std::string OpenError(const TextOptions& options, Split split = Split::kTrain) {
  auto data = OpenCharText(options, split);
  EXPECT_FALSE(data.ok()) << options.path;
  return data.ok() ? "" : data.status().message();
}

std::vector<float> Inputs(const Dataset& data, int64_t index, int* first_label = nullptr) {
  std::vector<float> inputs(data.example_shape().sample_size(), -1.0f);
  StatusOr<int> got = data.Get(index, 0, inputs.data());
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (first_label != nullptr) *first_label = got.ok() ? *got : -1;
  return inputs;
}

std::vector<float> Labels(const Dataset& data, int64_t index) {
  std::vector<float> labels(data.label_shape().sample_size(), -1.0f);
  Status status = data.GetPixelLabels(index, labels.data());
  EXPECT_TRUE(status.ok()) << status.ToString();
  return labels;
}

// The ids of `text` in a vocabulary of the sorted `symbols`.
std::vector<float> Ids(const std::string& text, const std::string& symbols) {
  std::vector<float> ids;
  for (char c : text) ids.push_back(static_cast<float>(symbols.find(c)));
  return ids;
}

// 40 bytes, 14 symbols " .abcdehinorst" in byte order; 2 test bytes at 0.05.
const char kText[] = "the cat sat on a hat. the bird did not. ";
const char kSymbols[] = " .abcdehinorst";

TEST(TextDatasetTest, WindowIdsAndNextSymbolLabels) {
  const std::string dir = TempDir("text_window");
  WriteTextFile(dir + "/corpus.txt", kText);
  auto data = Open(Options(dir + "/corpus.txt", 4));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->example_shape(), Shape(1, 1, 1, 4));
  EXPECT_EQ(data->label_shape(), Shape(1, 1, 1, 4));
  EXPECT_EQ(data->num_classes(), 14);
  EXPECT_EQ(data->size(), (38 - 1) / 4);  // 38 training bytes
  const std::string text = kText;
  for (int64_t i : {0, 3, 8}) {
    int first_label = -1;
    EXPECT_EQ(Inputs(*data, i, &first_label), Ids(text.substr(i * 4, 4), kSymbols)) << i;
    const std::vector<float> labels = Labels(*data, i);
    EXPECT_EQ(labels, Ids(text.substr(i * 4 + 1, 4), kSymbols)) << i;
    EXPECT_EQ(first_label, labels[0]) << i;
  }
  // Window 1 is "cat ": inputs c a t ' ', labels a t ' ' s.
  EXPECT_EQ(Inputs(*data, 1), std::vector<float>({4, 2, 13, 0}));
  EXPECT_EQ(Labels(*data, 1), std::vector<float>({2, 13, 0, 12}));
  EXPECT_THAT(data->Describe(), HasSubstr(dir + "/corpus.txt"));
  EXPECT_THAT(data->Describe(), HasSubstr("train split: 38 bytes, V=14 symbols, T=4"));
  std::vector<float> out(4);
  EXPECT_FALSE(data->Get(data->size(), 0, out.data()).ok());
  EXPECT_FALSE(data->Get(-1, 0, out.data()).ok());
  EXPECT_FALSE(data->GetPixelLabels(data->size(), out.data()).ok());
}

// The vocabulary spans both splits: a byte only in the test split still has
// its place, so both splits agree on V and on every id.
TEST(TextDatasetTest, VocabularyIsTheSortedBytesOfTheWholeCorpus) {
  const std::string dir = TempDir("text_vocabulary");
  std::string text(95, 'b');
  text += "zzaab";  // the last 5 bytes (test_fraction 0.05) hold the only z and a
  WriteTextFile(dir + "/corpus.txt", text);
  TextOptions options = Options(dir + "/corpus.txt", 2);
  auto train = Open(options, Split::kTrain);
  auto test = Open(options, Split::kTest);
  ASSERT_NE(train, nullptr);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(train->num_classes(), 3);
  EXPECT_EQ(test->num_classes(), 3);
  EXPECT_EQ(Inputs(*train, 0), std::vector<float>({1, 1}));  // b is 1 after a
  EXPECT_EQ(Inputs(*test, 0), std::vector<float>({2, 2}));   // z is 2
  EXPECT_EQ(Labels(*test, 1), std::vector<float>({0, 1}));   // "aa" is followed by "ab"

  // A vocabulary file: its distinct bytes, sorted, whether or not the corpus uses them.
  WriteTextFile(dir + "/vocab.txt", "zyxbbaa");
  options.vocabulary = dir + "/vocab.txt";
  train = Open(options, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->num_classes(), 5);                        // a b x y z
  EXPECT_EQ(Inputs(*train, 0), std::vector<float>({1, 1}));  // b
  test = Open(options, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(Inputs(*test, 0), std::vector<float>({4, 4}));  // z
  auto symbols = ReadCharVocabulary(dir + "/vocab.txt");
  ASSERT_TRUE(symbols.ok()) << symbols.status().ToString();
  EXPECT_EQ(*symbols, Bytes({'a', 'b', 'x', 'y', 'z'}));
}

// A folder: its regular files in name order (gunzipped where named .gz),
// without .dat indexes, symbolic links, hidden files or subfolders (the
// layout of /usr/share/games/fortunes).
TEST(TextDatasetTest, FolderIsItsTextFilesInNameOrder) {
  const std::string dir = TempDir("text_folder");
  const std::string corpus = dir + "/fortunes";
  fs::create_directories(corpus + "/off");
  WriteTextFile(corpus + "/b", std::string(10, 'b'));
  WriteTextFile(corpus + "/a", std::string(10, 'a'));
  testing::WriteGzip(corpus + "/c.gz", Bytes(20, 'c'));  // read gunzipped
  WriteTextFile(corpus + "/a.dat", "xxxxxxxxxx");
  WriteTextFile(corpus + "/.hidden", "xxxxxxxxxx");
  WriteTextFile(corpus + "/off/d", "xxxxxxxxxx");
  fs::create_symlink("a", corpus + "/a.u8");
  fs::create_symlink("off", corpus + "/link_to_folder");
  TextOptions options = Options(corpus, 5);
  options.test_fraction = 0.5;  // train: aaaaaaaaaabbbbbbbbbb, test: cccc...
  auto train = Open(options, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->num_classes(), 3);  // a b c: no x from the skipped entries
  EXPECT_EQ(train->size(), (20 - 1) / 5);
  EXPECT_EQ(Inputs(*train, 0), std::vector<float>(5, 0));
  EXPECT_EQ(Labels(*train, 1), std::vector<float>({0, 0, 0, 0, 1}));  // a's end, then b
  EXPECT_EQ(Inputs(*train, 2), std::vector<float>(5, 1));
  auto test = Open(options, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(Inputs(*test, 0), std::vector<float>(5, 2));
  EXPECT_THAT(train->Describe(), HasSubstr(corpus));
}

TEST(TextDatasetTest, TheLastTestFractionOfBytesIsTheTestSplit) {
  const std::string dir = TempDir("text_split");
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('A' + i % 50));
  WriteTextFile(dir + "/corpus.txt", text);
  TextOptions options = Options(dir + "/corpus.txt", 10);
  options.test_fraction = 0.1;
  auto train = Open(options, Split::kTrain);
  auto test = Open(options, Split::kTest);
  ASSERT_NE(train, nullptr);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(train->size(), (900 - 1) / 10);
  EXPECT_EQ(test->size(), (100 - 1) / 10);
  EXPECT_THAT(test->Describe(), HasSubstr("test split: 100 bytes"));
  // Byte 900 ('A' + 0) opens the test split; byte 899 closes the training one.
  EXPECT_EQ(Inputs(*test, 0)[0], 0.0f);
  EXPECT_EQ(Inputs(*test, 0)[1], 1.0f);
  EXPECT_EQ(Labels(*train, train->size() - 1).back(), static_cast<float>((880 + 10) % 50));
  options.test_fraction = 0.5;
  test = Open(options, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->size(), (500 - 1) / 10);
}

// Streams: example b*B + r is stream r's b-th window at r*L + b*T, so each
// example continues the one B before it, where it stopped.
TEST(TextDatasetTest, StreamsAreContiguousAcrossBatches) {
  const std::string dir = TempDir("text_streams");
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(static_cast<char>(i));  // id = byte value
  WriteTextFile(dir + "/corpus.bin", text);
  constexpr int64_t kStreams = 3, kT = 4;
  TextOptions options = Options(dir + "/corpus.bin", kT);
  options.streams = kStreams;
  auto train = Open(options, Split::kTrain);  // 190 bytes
  ASSERT_NE(train, nullptr);
  const int64_t stream_bytes = (190 - 1) / kStreams / kT * kT;  // 60
  EXPECT_EQ(train->size(), kStreams * (stream_bytes / kT));
  EXPECT_THAT(train->Describe(), HasSubstr("3 streams of 60 bytes"));
  for (int64_t r = 0; r < kStreams; ++r) {
    EXPECT_EQ(Inputs(*train, r)[0], static_cast<float>(r * stream_bytes)) << r;
    for (int64_t b = 1; b < stream_bytes / kT; ++b) {
      const int64_t i = b * kStreams + r;
      const std::vector<float> inputs = Inputs(*train, i);
      ASSERT_EQ(inputs[0], Labels(*train, i - kStreams).back())
          << "stream " << r << " window " << b;
      ASSERT_EQ(inputs[0], static_cast<float>(r * stream_bytes + b * kT));
      ASSERT_EQ(Labels(*train, i)[0], inputs[1]);
    }
  }
  // The last window of the last stream ends inside the split.
  EXPECT_EQ(Labels(*train, train->size() - 1).back(), static_cast<float>(kStreams * stream_bytes));
}

// Without shuffling, batches hold examples in order: N x 1 x 1 x T ids and
// N x T labels; with streams and a batch of B, row r of every batch is stream r.
TEST(TextDatasetTest, LoaderBatchesIdsAndLabels) {
  const std::string dir = TempDir("text_loader");
  std::string text;
  for (int i = 0; i < 400; ++i) text.push_back(static_cast<char>('a' + (i * 7) % 26));
  WriteTextFile(dir + "/corpus.txt", text);
  constexpr int64_t kBatch = 4, kT = 8;
  for (int64_t streams : {int64_t{0}, kBatch}) {
    TextOptions options = Options(dir + "/corpus.txt", kT);
    options.streams = streams;
    auto data = Open(options);
    ASSERT_NE(data, nullptr);
    LoaderOptions lo;
    lo.batch = kBatch;
    lo.shuffle = false;
    lo.workers = 2;
    Loader loader(*data, lo);
    ASSERT_EQ(loader.batches_per_epoch(), data->size() / kBatch);
    for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
      StatusOr<Batch> batch = loader.Next();
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      ASSERT_EQ(batch->size, kBatch);
      ASSERT_EQ(batch->images.size(), static_cast<size_t>(kBatch * kT));
      ASSERT_EQ(batch->labels.size(), static_cast<size_t>(kBatch * kT));
      for (int64_t row = 0; row < kBatch; ++row) {
        const int64_t example = b * kBatch + row;
        const std::vector<float> inputs(batch->images.begin() + row * kT,
                                        batch->images.begin() + (row + 1) * kT);
        const std::vector<float> labels(batch->labels.begin() + row * kT,
                                        batch->labels.begin() + (row + 1) * kT);
        ASSERT_EQ(inputs, Inputs(*data, example)) << "streams " << streams << " batch " << b;
        ASSERT_EQ(labels, Labels(*data, example)) << "streams " << streams << " batch " << b;
        for (int64_t t = 0; t + 1 < kT; ++t) ASSERT_EQ(labels[t], inputs[t + 1]);
      }
    }
  }
}

TEST(TextDatasetTest, BadInputsAreErrorsNamingTheFile) {
  const std::string dir = TempDir("text_errors");
  const std::string corpus = dir + "/corpus.txt";
  WriteTextFile(corpus, kText);

  EXPECT_THAT(OpenError(Options(dir + "/missing.txt", 4)),
              HasSubstr(dir + "/missing.txt does not exist"));
  WriteTextFile(dir + "/empty.txt", "");
  EXPECT_THAT(OpenError(Options(dir + "/empty.txt", 4)), HasSubstr(dir + "/empty.txt is empty"));
  fs::create_directories(dir + "/no_text/sub");
  WriteTextFile(dir + "/no_text/index.dat", "abcdefgh");
  EXPECT_THAT(OpenError(Options(dir + "/no_text", 4)),
              HasSubstr(dir + "/no_text holds no text files"));
  fs::create_directories(dir + "/empty_files");
  WriteTextFile(dir + "/empty_files/a", "");
  WriteTextFile(dir + "/empty_files/b", "");
  EXPECT_THAT(OpenError(Options(dir + "/empty_files", 4)),
              HasSubstr(dir + "/empty_files: its text files are empty"));

  // 40 bytes: 38 for training, 2 for testing.
  std::string message = OpenError(Options(corpus, 38));
  EXPECT_THAT(message, HasSubstr(corpus + ": the training split has 38 bytes (of 40)"));
  EXPECT_THAT(message, HasSubstr("needs 39 bytes"));
  message = OpenError(Options(corpus, 2), Split::kTest);
  EXPECT_THAT(message, HasSubstr(corpus + ": the test split has 2 bytes"));
  EXPECT_THAT(message, HasSubstr("needs 3 bytes (raise test_fraction"));
  EXPECT_TRUE(OpenCharText(Options(corpus, 1), Split::kTest).ok());
  TextOptions streams = Options(corpus, 4);
  streams.streams = 10;  // 10 streams of 4 need 41 bytes
  message = OpenError(streams);
  EXPECT_THAT(message, HasSubstr(corpus + ": the training split has 38 bytes"));
  EXPECT_THAT(message, HasSubstr("10 streams of one window of 4 symbols"));
  EXPECT_THAT(message, HasSubstr("needs 41 bytes"));
  streams.streams = 9;  // 37 bytes: fits
  EXPECT_TRUE(OpenCharText(streams, Split::kTrain).ok());
  streams.streams = -1;
  EXPECT_THAT(OpenError(streams), HasSubstr(corpus + ": streams -1 is outside"));

  for (int64_t sequence : {int64_t{0}, int64_t{-3}, (int64_t{1} << 20) + 1}) {
    EXPECT_THAT(OpenError(Options(corpus, sequence)),
                HasSubstr(corpus + ": sequence " + std::to_string(sequence) + " is outside [1, "))
        << sequence;
  }
  for (const auto& [fraction, text] : std::vector<std::pair<double, std::string>>{
           {0.0, "0"},
           {-0.1, "-0.1"},
           {0.51, "0.51"},
           {std::numeric_limits<double>::quiet_NaN(), "nan"}}) {
    TextOptions options = Options(corpus, 4);
    options.test_fraction = fraction;
    EXPECT_THAT(OpenError(options),
                HasSubstr(corpus + ": test_fraction " + text + " is outside (0, 0.5]"));
  }

  TextOptions vocabulary = Options(corpus, 4);
  vocabulary.vocabulary = dir + "/empty.txt";
  EXPECT_THAT(OpenError(vocabulary), HasSubstr(dir + "/empty.txt is empty; expected a vocabulary"));
  vocabulary.vocabulary = dir + "/no_vocabulary.txt";
  EXPECT_THAT(OpenError(vocabulary), HasSubstr(dir + "/no_vocabulary.txt"));
  // In a folder, the offset is the byte's within its own file.
  fs::create_directories(dir + "/folder");
  WriteTextFile(dir + "/folder/a", "the cat sat");
  WriteTextFile(dir + "/folder/b", "on a\bhat");
  WriteTextFile(dir + "/vocab.txt", "abcdefghijklmnopqrstuvwxyz ");
  vocabulary.path = dir + "/folder";
  vocabulary.vocabulary = dir + "/vocab.txt";
  EXPECT_THAT(OpenError(vocabulary),
              HasSubstr(dir + "/folder/b: byte 4 is 0x08, which is not in the vocabulary of " +
                        dir + "/vocab.txt"));
  EXPECT_THAT(OpenError(vocabulary, Split::kTest), HasSubstr(dir + "/folder/b: byte 4 is 0x08"));
}

}  // namespace
}  // namespace spill
