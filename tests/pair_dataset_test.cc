// Sequence pairs (OpenPairs, ReadMoCatalog) on small files written here:
// line-aligned text and its errors, gettext catalogs built byte by byte in
// both byte orders (header, plural, context and untranslated entries) and
// damaged ones, the vocabulary and its errors, max_length and skip_longer,
// the synthetic tasks, buckets and the batches of an epoch, and the arrays
// Fill writes.
#include "data/pair_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "framework/base/random.h"
#include "tests/testing/data_files.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteTextFile;

PairOptions TextPairs(const std::string& source, const std::string& target, int64_t max_length) {
  PairOptions options;
  options.source = source;
  options.target = target;
  options.max_length = max_length;
  options.test_fraction = 0;
  return options;
}

PairOptions Synthetic(const std::string& task, int64_t pairs, int64_t min_length,
                      int64_t max_length, uint64_t seed) {
  PairOptions options;
  options.synthetic = task;
  options.synthetic_pairs = pairs;
  options.synthetic_min_length = min_length;
  options.synthetic_max_length = max_length;
  options.seed = seed;
  options.max_length = max_length + 1;
  options.test_fraction = 0;
  return options;
}

std::unique_ptr<PairDataset> Open(const PairOptions& options, Split split = Split::kTrain) {
  auto data = OpenPairs(options, split);
  EXPECT_TRUE(data.ok()) << data.status().ToString();
  return data.ok() ? std::move(data).value() : nullptr;
}

std::string OpenError(const PairOptions& options, Split split = Split::kTrain) {
  auto data = OpenPairs(options, split);
  EXPECT_FALSE(data.ok()) << options.source << options.synthetic;
  return data.ok() ? "" : data.status().message();
}

// The arrays Fill writes for `batch`, each row T wide.
struct Filled {
  std::vector<float> source, input, labels;
};

Filled FillRows(const PairDataset& data, const PairBatch& batch, int64_t t_source, int64_t t_target,
                float ignore = -1) {
  const size_t n = batch.indices.size();
  Filled f{std::vector<float>(n * t_source, 99), std::vector<float>(n * t_target, 99),
           std::vector<float>(n * t_target, 99)};
  Status status = data.Fill(batch, t_source, t_target, ignore, f.source.data(), f.input.data(),
                            f.labels.data());
  EXPECT_TRUE(status.ok()) << status.ToString();
  return f;
}

PairBatch BatchOf(const PairDataset& data, std::vector<int64_t> indices) {
  PairBatch batch;
  for (int64_t i : indices) {
    batch.source_length = std::max(batch.source_length, data.source_length(i));
    batch.target_length = std::max(batch.target_length, data.target_length(i));
  }
  batch.length = std::max(batch.source_length, batch.target_length);
  batch.indices = std::move(indices);
  return batch;
}

// Pair i's two sides as text, through Fill and the vocabulary's symbols.
std::pair<std::string, std::string> PairText(const PairDataset& data, int64_t i) {
  const int64_t t = data.bucket_bounds().back();
  const Filled f = FillRows(data, BatchOf(data, {i}), t, t);
  auto text = [&](const std::vector<float>& ids) {
    std::string out;
    for (float id : ids) {
      if (id >= kReservedIds) out.push_back(static_cast<char>(data.symbols()[id - kReservedIds]));
    }
    return out;
  };
  return {text(f.source), text(f.labels)};
}

// ---------------------------------------------------------------------------
// A gettext catalog's bytes: header, the two tables, then the strings, each
// followed by a NUL, in either byte order.

struct Message {
  std::string msgid, msgstr;
};

void PutWord(Bytes* bytes, uint32_t value, bool big_endian) {
  for (int i = 0; i < 4; ++i) {
    const int shift = big_endian ? 24 - 8 * i : 8 * i;
    bytes->push_back((value >> shift) & 0xff);
  }
}

void SetWord(Bytes* bytes, size_t offset, uint32_t value, bool big_endian = false) {
  Bytes word;
  PutWord(&word, value, big_endian);
  std::copy(word.begin(), word.end(), bytes->begin() + offset);
}

constexpr uint32_t kHeader = 28;

Bytes MoFile(const std::vector<Message>& messages, bool big_endian = false) {
  const uint32_t n = messages.size();
  Bytes bytes;
  for (uint32_t word : {0x950412deu, 0u, n, kHeader, kHeader + 8 * n, 0u, kHeader + 16 * n}) {
    PutWord(&bytes, word, big_endian);
  }
  std::string strings;
  const uint32_t first = kHeader + 16 * n;
  std::vector<std::pair<uint32_t, uint32_t>> tables[2];
  for (int t = 0; t < 2; ++t) {
    for (const Message& m : messages) {
      const std::string& s = t == 0 ? m.msgid : m.msgstr;
      tables[t].push_back({static_cast<uint32_t>(s.size()), first + strings.size()});
      strings += s;
      strings.push_back('\0');
    }
  }
  for (const auto& table : tables) {
    for (const auto& [length, offset] : table) {
      PutWord(&bytes, length, big_endian);
      PutWord(&bytes, offset, big_endian);
    }
  }
  bytes.insert(bytes.end(), strings.begin(), strings.end());
  return bytes;
}

// A header, a plain message, a plural one, one with a context and an
// untranslated one: three messages come out.
const std::vector<Message> kCatalog = {
    {"", "Content-Type: text/plain; charset=UTF-8\n"},
    {"hello", "bonjour"},
    {std::string("file\0files", 10), std::string("fichier\0fichiers", 16)},
    {"menu\x04Open", "Ouvrir"},
    {"untranslated", ""},
};

std::string ReadError(const std::string& path) {
  auto messages = ReadMoCatalog(path);
  EXPECT_FALSE(messages.ok()) << path;
  return messages.ok() ? "" : messages.status().message();
}

// ---------------------------------------------------------------------------
// Line-aligned text.

TEST(PairDatasetTest, LineAlignedFilesGivePairsOfIds) {
  const std::string dir = TempDir("pairs_text");
  WriteTextFile(dir + "/train.src", "ab\nba\n\nabc\n");
  WriteTextFile(dir + "/train.tgt", "xy\r\nyx\n\nzzz");  // CRLF, no final newline
  auto data = Open(TextPairs(dir + "/train.src", dir + "/train.tgt", 8));
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(data->size(), 3);  // line 3, empty on both sides, is skipped
  EXPECT_EQ(data->symbols(), Bytes({'a', 'b', 'c', 'x', 'y', 'z'}));
  EXPECT_EQ(data->vocabulary_size(), 3 + 6);
  EXPECT_EQ(data->source_length(2), 3);
  EXPECT_EQ(data->target_length(2), 4);  // zzz + <eos>
  EXPECT_EQ(PairText(*data, 0), std::make_pair(std::string("ab"), std::string("xy")));
  EXPECT_EQ(PairText(*data, 1), std::make_pair(std::string("ba"), std::string("yx")));
  EXPECT_EQ(PairText(*data, 2), std::make_pair(std::string("abc"), std::string("zzz")));
  EXPECT_THAT(data->Describe(), HasSubstr(dir + "/train.src, " + dir + "/train.tgt"));
  EXPECT_THAT(data->Describe(), HasSubstr("train split: 3 pairs, V=9 ids (3 reserved + 6 bytes)"));

  // The test split is the last pairs in corpus order.
  PairOptions options = TextPairs(dir + "/train.src", dir + "/train.tgt", 8);
  options.test_fraction = 0.4;  // floor(3 * 0.4) = 1
  auto train = Open(options, Split::kTrain);
  auto test = Open(options, Split::kTest);
  ASSERT_NE(train, nullptr);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(train->size(), 2);
  ASSERT_EQ(test->size(), 1);
  EXPECT_EQ(PairText(*test, 0).first, "abc");
  EXPECT_EQ(test->symbols(), data->symbols());  // the vocabulary spans both splits
  EXPECT_THAT(OpenError(TextPairs(dir + "/train.src", dir + "/train.tgt", 8), Split::kTest),
              HasSubstr("the test split has no pairs (3 pairs in all, test_fraction 0)"));
}

TEST(PairDatasetTest, LineCountsMustMatch) {
  const std::string dir = TempDir("pairs_counts");
  WriteTextFile(dir + "/a.de", "eins\nzwei\ndrei\n");
  WriteTextFile(dir + "/a.en", "one\ntwo\n");
  const std::string message = OpenError(TextPairs(dir + "/a.de", dir + "/a.en", 8));
  EXPECT_THAT(message, HasSubstr(dir + "/a.de has 3 lines and " + dir + "/a.en has 2"));
  EXPECT_THAT(message, HasSubstr(dir + "/a.en ran out first, after line 2"));
  EXPECT_THAT(OpenError(TextPairs(dir + "/a.en", dir + "/a.de", 8)),
              HasSubstr(dir + "/a.en ran out first, after line 2"));
}

TEST(PairDatasetTest, AnEmptySideIsAnError) {
  const std::string dir = TempDir("pairs_empty_side");
  WriteTextFile(dir + "/s", "a\n\nc\n");
  WriteTextFile(dir + "/t", "x\ny\nz\n");
  EXPECT_THAT(OpenError(TextPairs(dir + "/s", dir + "/t", 8)),
              HasSubstr(dir + "/s:2 is empty but " + dir + "/t:2 is not"));
  EXPECT_THAT(OpenError(TextPairs(dir + "/t", dir + "/s", 8)),
              HasSubstr(dir + "/s:2 is empty but " + dir + "/t:2 is not"));
  WriteTextFile(dir + "/blank", "\n\n\n");
  EXPECT_THAT(OpenError(TextPairs(dir + "/blank", dir + "/blank", 8)), HasSubstr("no pairs"));
  EXPECT_THAT(OpenError(TextPairs(dir + "/missing", dir + "/t", 8)), HasSubstr(dir + "/missing"));
}

// ---------------------------------------------------------------------------
// Catalogs.

TEST(PairDatasetTest, CatalogsInBothByteOrders) {
  const std::string dir = TempDir("pairs_mo");
  for (bool big_endian : {false, true}) {
    const std::string path = dir + (big_endian ? "/be.mo" : "/le.mo");
    testing::WriteFile(path, MoFile(kCatalog, big_endian));
    auto messages = ReadMoCatalog(path);
    ASSERT_TRUE(messages.ok()) << messages.status().ToString();
    ASSERT_EQ(messages->size(), 3u) << path;
    EXPECT_EQ((*messages)[0].entry, 1);
    EXPECT_EQ((*messages)[0].msgid, "hello");
    EXPECT_EQ((*messages)[0].msgstr, "bonjour");
    EXPECT_EQ((*messages)[1].entry, 2);
    EXPECT_EQ((*messages)[1].msgid, "file");  // the singular of a plural entry
    EXPECT_EQ((*messages)[1].msgstr, "fichier");
    EXPECT_EQ((*messages)[2].entry, 3);
    EXPECT_EQ((*messages)[2].msgid, "Open");  // without its context
    EXPECT_EQ((*messages)[2].msgstr, "Ouvrir");
  }
}

// A folder: its regular *.mo files in name order, nothing else.
TEST(PairDatasetTest, CatalogFolderInNameOrder) {
  const std::string dir = TempDir("pairs_mo_folder");
  const std::string folder = dir + "/LC_MESSAGES";
  fs::create_directories(folder + "/sub.mo");
  testing::WriteFile(folder + "/b.mo", MoFile({{"two", "deux"}}));
  testing::WriteFile(folder + "/a.mo", MoFile({{"one", "un"}}, true));
  testing::WriteFile(folder + "/.hidden.mo", MoFile({{"qqq", "qqq"}}));
  WriteTextFile(folder + "/notes.txt", "not a catalog");
  fs::create_symlink("a.mo", folder + "/link.mo");
  PairOptions options;
  options.catalogs = {folder};
  options.max_length = 8;
  options.test_fraction = 0;
  auto data = Open(options);
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(data->size(), 2);
  EXPECT_EQ(PairText(*data, 0), std::make_pair(std::string("one"), std::string("un")));
  EXPECT_EQ(PairText(*data, 1), std::make_pair(std::string("two"), std::string("deux")));
  EXPECT_EQ(std::count(data->symbols().begin(), data->symbols().end(), 'q'), 0);

  // Files listed one by one, in the order given.
  options.catalogs = {folder + "/b.mo", folder + "/a.mo"};
  data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(PairText(*data, 0).first, "two");

  fs::create_directories(dir + "/none");
  options.catalogs = {dir + "/none"};
  EXPECT_THAT(OpenError(options), HasSubstr(dir + "/none holds no .mo files"));
  testing::WriteFile(dir + "/header_only.mo", MoFile({{"", "Content-Type: text/plain\n"}}));
  options.catalogs = {dir + "/header_only.mo"};
  EXPECT_THAT(OpenError(options), HasSubstr("no pairs"));
}

TEST(PairDatasetTest, DamagedCatalogsAreErrorsNamingTheFile) {
  const std::string dir = TempDir("pairs_mo_damaged");
  const Bytes good = MoFile(kCatalog);
  const std::string path = dir + "/damaged.mo";
  auto error_of = [&](const Bytes& bytes) {
    testing::WriteFile(path, bytes);
    return ReadError(path);
  };
  Bytes bytes = good;
  SetWord(&bytes, 0, 0x12345678);
  EXPECT_THAT(error_of(bytes), HasSubstr(path + ": magic number 0x78563412 is not"));
  EXPECT_THAT(error_of(Bytes(good.begin(), good.begin() + 10)),
              HasSubstr(path + " is 10 bytes, too short"));
  bytes = good;
  SetWord(&bytes, 4, 2u << 16);
  EXPECT_THAT(error_of(bytes), HasSubstr(path + ": revision 0x00020000"));
  bytes = good;
  SetWord(&bytes, 8, 0xffffffff);  // N huge
  EXPECT_THAT(error_of(bytes), HasSubstr(path + ": its table of originals (msgid), 4294967295"));
  bytes = good;
  SetWord(&bytes, 16, 0xfffffff0);  // the translations' table past the end
  EXPECT_THAT(error_of(bytes), HasSubstr(path + ": its table of translations (msgstr)"));
  bytes = good;
  SetWord(&bytes, kHeader + 8 * 2 + 4, good.size() + 1);  // entry 2's msgid offset past the end
  EXPECT_THAT(error_of(bytes), HasSubstr(path + ": entry 2: its msgid (10 bytes at offset"));
  bytes = good;
  SetWord(&bytes, kHeader + 8 * 5 + 8 * 3, 0xffffffff);  // entry 3's msgstr length overflows
  EXPECT_THAT(error_of(bytes),
              HasSubstr(path + ": entry 3: its msgstr (4294967295 bytes at offset"));
  EXPECT_THAT(error_of(bytes), HasSubstr("runs past the end of the file (" +
                                         std::to_string(good.size()) + " bytes)"));
  PairOptions options;
  options.catalogs = {path};
  options.max_length = 8;
  EXPECT_THAT(OpenError(options), HasSubstr(path + ": entry 3"));

  // Every truncation, random bytes, and every word of the header and tables
  // overwritten with extreme values: an answer, never a crash; a refusal
  // names the file.
  for (size_t size = 0; size < good.size(); ++size) {
    testing::WriteFile(path, Bytes(good.begin(), good.begin() + size));
    auto messages = ReadMoCatalog(path);
    if (!messages.ok()) {
      EXPECT_THAT(messages.status().message(), HasSubstr(path)) << size;
    }
  }
  for (uint64_t draw = 0; draw < 200; ++draw) {  // a few bytes anywhere set at random
    bytes = good;
    for (uint64_t k = 0; k < 1 + draw % 4; ++k) {
      const uint64_t bits = Mix64(draw * 8 + k);
      bytes[bits % bytes.size()] = static_cast<uint8_t>(bits >> 56);
    }
    testing::WriteFile(path, bytes);
    auto messages = ReadMoCatalog(path);
    if (!messages.ok()) {
      EXPECT_THAT(messages.status().message(), HasSubstr(path)) << draw;
    }
  }
  for (size_t offset = 0; offset + 4 <= kHeader + 16 * kCatalog.size(); offset += 4) {
    for (uint32_t value : {0u, 1u, 0x7fffffffu, 0xffffffffu, static_cast<uint32_t>(good.size())}) {
      bytes = good;
      SetWord(&bytes, offset, value);
      testing::WriteFile(path, bytes);
      auto messages = ReadMoCatalog(path);
      if (!messages.ok()) {
        EXPECT_THAT(messages.status().message(), HasSubstr(path)) << offset;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Vocabulary and lengths.

TEST(PairDatasetTest, VocabularyFile) {
  const std::string dir = TempDir("pairs_vocabulary");
  WriteTextFile(dir + "/s", "ab\nba\n");
  WriteTextFile(dir + "/t", "b\na!\n");
  WriteTextFile(dir + "/vocab", "zba");
  PairOptions options = TextPairs(dir + "/s", dir + "/t", 8);
  options.vocabulary = dir + "/vocab";
  EXPECT_THAT(
      OpenError(options),
      HasSubstr(dir + "/t:2: byte 1 is 0x21, which is not in the vocabulary of " + dir + "/vocab"));
  WriteTextFile(dir + "/vocab", "zba!");
  auto data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->symbols(), Bytes({'!', 'a', 'b', 'z'}));
  const Filled f = FillRows(*data, BatchOf(*data, {1}), 2, 3);
  EXPECT_EQ(f.source, std::vector<float>({5, 4}));     // b a
  EXPECT_EQ(f.labels, std::vector<float>({4, 3, 2}));  // a ! <eos>
}

TEST(PairDatasetTest, LongerThanMaxLength) {
  const std::string dir = TempDir("pairs_long");
  WriteTextFile(dir + "/s", "abc\nabcdef\nab\nabc\n");
  WriteTextFile(dir + "/t", "xyz\nxy\nwxyzw\nx\n");
  // Pair lengths: max(3, 4) = 4, 6, 6, 3.
  std::string message = OpenError(TextPairs(dir + "/s", dir + "/t", 5));
  EXPECT_THAT(message, HasSubstr(dir + "/s:2 and " + dir + "/t:2: the source is 6 tokens and " +
                                 "the target 3 (with <eos>), longer than max_length 5"));
  EXPECT_THAT(message, HasSubstr("skip_longer"));
  PairOptions options = TextPairs(dir + "/s", dir + "/t", 5);
  options.skip_longer = true;
  auto data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->size(), 2);
  EXPECT_EQ(data->skipped(), 2);
  EXPECT_THAT(data->Describe(), HasSubstr("2 longer pairs skipped"));
  EXPECT_EQ(PairText(*data, 1), std::make_pair(std::string("abc"), std::string("x")));
  // The skipped pairs' bytes are not in the vocabulary.
  EXPECT_EQ(std::count(data->symbols().begin(), data->symbols().end(), 'w'), 0);
  EXPECT_TRUE(OpenPairs(TextPairs(dir + "/s", dir + "/t", 6), Split::kTrain).ok());
  options.max_length = 2;
  EXPECT_THAT(OpenError(options), HasSubstr("all 4 pairs are longer than max_length 2"));
}

// ---------------------------------------------------------------------------
// Synthetic tasks.

TEST(PairDatasetTest, SyntheticReverse) {
  auto data = Open(Synthetic("reverse", 200, 2, 9, 7));
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(data->size(), 200);
  std::set<int64_t> lengths;
  for (int64_t i = 0; i < data->size(); ++i) {
    const auto [source, target] = PairText(*data, i);
    ASSERT_EQ(target, std::string(source.rbegin(), source.rend())) << i;
    ASSERT_TRUE(
        std::all_of(source.begin(), source.end(), [](char c) { return c >= 'a' && c <= 'z'; }));
    lengths.insert(source.size());
  }
  EXPECT_EQ(lengths, std::set<int64_t>({2, 3, 4, 5, 6, 7, 8, 9}));
  // Pair i depends on (seed, i) only; another seed gives other pairs.
  auto again = Open(Synthetic("reverse", 50, 2, 9, 7));
  auto other = Open(Synthetic("reverse", 200, 2, 9, 8));
  ASSERT_NE(again, nullptr);
  ASSERT_NE(other, nullptr);
  int same = 0;
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(PairText(*again, i), PairText(*data, i)) << i;
    same += PairText(*other, i) == PairText(*data, i);
  }
  EXPECT_LT(same, 5);
}

TEST(PairDatasetTest, SyntheticAdd) {
  auto data = Open(Synthetic("add", 300, 3, 12, 3));
  ASSERT_NE(data, nullptr);
  std::set<size_t> lengths;
  for (int64_t i = 0; i < data->size(); ++i) {
    const auto [source, target] = PairText(*data, i);
    const size_t plus = source.find('+');
    ASSERT_NE(plus, std::string::npos) << source;
    const std::string a = source.substr(0, plus), b = source.substr(plus + 1);
    ASSERT_FALSE(a.empty() || b.empty()) << source;
    ASSERT_TRUE(a.size() == 1 || a[0] != '0') << source;
    ASSERT_TRUE(b.size() == 1 || b[0] != '0') << source;
    ASSERT_EQ(std::stoull(target), std::stoull(a) + std::stoull(b)) << source << " = " << target;
    ASSERT_EQ(target, std::to_string(std::stoull(target))) << source;
    lengths.insert(source.size());
  }
  EXPECT_EQ(*lengths.begin(), 3u);
  EXPECT_EQ(*lengths.rbegin(), 12u);
  // Numbers of any width: the sum, checked digit by digit from the right.
  auto wide = Open(Synthetic("add", 20, 81, 81, 5));
  ASSERT_NE(wide, nullptr);
  for (int64_t i = 0; i < wide->size(); ++i) {
    const auto [source, target] = PairText(*wide, i);
    ASSERT_EQ(source.size(), 81u);
    const std::string a = source.substr(0, source.find('+'));
    const std::string b = source.substr(source.find('+') + 1);
    int carry = 0;
    for (size_t d = 0; d < target.size(); ++d) {
      int digit = carry;
      if (d < a.size()) digit += a[a.size() - 1 - d] - '0';
      if (d < b.size()) digit += b[b.size() - 1 - d] - '0';
      ASSERT_EQ(target[target.size() - 1 - d], '0' + digit % 10) << source << " digit " << d;
      carry = digit / 10;
    }
    ASSERT_EQ(carry, 0) << source;
    ASSERT_GE(target.size(), std::max(a.size(), b.size())) << source;
  }
  EXPECT_THAT(OpenError(Synthetic("add", 10, 2, 5, 1)), HasSubstr("3 <= min <= max"));
  EXPECT_THAT(OpenError(Synthetic("sort", 10, 2, 5, 1)),
              HasSubstr("unknown synthetic task 'sort' (known: reverse, add)"));
  PairOptions longer = Synthetic("reverse", 10, 6, 6, 1);
  longer.max_length = 6;  // a target of 6 needs 7 with <eos>
  EXPECT_THAT(OpenError(longer), HasSubstr("synthetic reverse (seed 1): pair 0: the source is 6"));
}

// ---------------------------------------------------------------------------
// Buckets and batches.

TEST(PairDatasetTest, BucketsHoldPairsByLength) {
  PairOptions options = Synthetic("reverse", 300, 1, 15, 11);  // max_length 16
  auto data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->bucket_bounds(), std::vector<int64_t>({4, 8, 12, 16}));
  for (int64_t i = 0; i < data->size(); ++i) {
    const int64_t length = std::max(data->source_length(i), data->target_length(i));
    const int64_t b = data->bucket(i);
    ASSERT_GE(data->bucket_bounds()[b], length) << i;
    if (b > 0) {
      ASSERT_LT(data->bucket_bounds()[b - 1], length) << i;
    }
  }
  options.bucket_bounds = {10, 16};
  data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->bucket_bounds(), std::vector<int64_t>({10, 16}));
  for (std::vector<int64_t> bad : std::vector<std::vector<int64_t>>{{4, 8}, {8, 8, 16}, {0, 16}}) {
    options.bucket_bounds = bad;
    EXPECT_THAT(OpenError(options), HasSubstr("must increase from at least 1 and end at "
                                              "max_length 16"));
  }
  options.bucket_bounds.clear();
  options.max_length = 2;
  options.synthetic_max_length = 1;
  data = Open(options);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->bucket_bounds(), std::vector<int64_t>({1, 2}));
}

TEST(PairDatasetTest, EpochBatchesCoverEveryPairOnce) {
  auto data = Open(Synthetic("reverse", 203, 1, 15, 11));
  ASSERT_NE(data, nullptr);
  constexpr int64_t kBatch = 8;
  auto epoch = data->EpochBatches(kBatch, 42);
  ASSERT_TRUE(epoch.ok()) << epoch.status().ToString();
  std::vector<int> seen(data->size(), 0);
  std::vector<int64_t> bucket_pairs(4, 0), short_batches(4, 0), batches(4, 0);
  for (const PairBatch& batch : *epoch) {
    ASSERT_FALSE(batch.indices.empty());
    ASSERT_LE(static_cast<int64_t>(batch.indices.size()), kBatch);
    ASSERT_EQ(batch.bound, data->bucket_bounds()[batch.bucket]);
    int64_t longest = 0;
    for (int64_t i : batch.indices) {
      ASSERT_EQ(data->bucket(i), batch.bucket) << i;
      longest = std::max({longest, data->source_length(i), data->target_length(i)});
      ++seen[i];
    }
    ASSERT_EQ(batch.length, longest);
    ASSERT_LE(batch.length, batch.bound);
    bucket_pairs[batch.bucket] += batch.indices.size();
    short_batches[batch.bucket] += static_cast<int64_t>(batch.indices.size()) < kBatch;
    ++batches[batch.bucket];
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), data->size());
  for (int b = 0; b < 4; ++b) {
    EXPECT_LE(short_batches[b], 1) << b;  // only a bucket's last batch is partial
    EXPECT_EQ(batches[b], (bucket_pairs[b] + kBatch - 1) / kBatch) << b;
  }
  // Batches of several buckets are interleaved, not grouped by bucket.
  std::vector<int64_t> order;
  for (const PairBatch& batch : *epoch) order.push_back(batch.bucket);
  EXPECT_FALSE(std::is_sorted(order.begin(), order.end()));

  auto same = data->EpochBatches(kBatch, 42);
  auto other = data->EpochBatches(kBatch, 43);
  ASSERT_TRUE(same.ok() && other.ok());
  auto indices = [](const std::vector<PairBatch>& batches) {
    std::vector<std::vector<int64_t>> all;
    for (const PairBatch& b : batches) all.push_back(b.indices);
    return all;
  };
  EXPECT_EQ(indices(*same), indices(*epoch));
  EXPECT_NE(indices(*other), indices(*epoch));
  EXPECT_EQ(other->size(), epoch->size());
  // Another seed regroups the pairs, beyond reordering the same batches.
  auto contents = [&](const std::vector<PairBatch>& batches) {
    std::vector<std::vector<int64_t>> all = indices(batches);
    for (std::vector<int64_t>& members : all) std::sort(members.begin(), members.end());
    std::sort(all.begin(), all.end());
    return all;
  };
  EXPECT_NE(contents(*other), contents(*epoch));
  EXPECT_THAT(data->EpochBatches(0, 1).status().message(), HasSubstr("batch 0 must be at least 1"));
}

// ---------------------------------------------------------------------------
// Fill.

TEST(PairDatasetTest, FillPadsAndMarksIgnoredLabels) {
  const std::string dir = TempDir("pairs_fill");
  WriteTextFile(dir + "/s", "abc\nb\n");
  WriteTextFile(dir + "/t", "x\nyxy\n");
  auto data = Open(TextPairs(dir + "/s", dir + "/t", 6));
  ASSERT_NE(data, nullptr);
  // Ids: a 3, b 4, c 5, x 6, y 7.
  const PairBatch batch = BatchOf(*data, {1, 0});
  EXPECT_EQ(batch.source_length, 3);
  EXPECT_EQ(batch.target_length, 4);  // yxy + <eos>
  const Filled f = FillRows(*data, batch, 4, 6, -1);
  EXPECT_EQ(f.source, std::vector<float>({4, 0, 0, 0,  //
                                          3, 4, 5, 0}));
  EXPECT_EQ(f.input, std::vector<float>({1, 7, 6, 7, 0, 0,  //
                                         1, 6, 0, 0, 0, 0}));
  EXPECT_EQ(f.labels, std::vector<float>({7, 6, 7, 2, -1, -1,  //
                                          6, 2, -1, -1, -1, -1}));
  // Exactly the batch's lengths fit; another ignore value is written as given.
  const Filled tight = FillRows(*data, batch, 3, 4, -100);
  EXPECT_EQ(tight.source, std::vector<float>({4, 0, 0, 3, 4, 5}));
  EXPECT_EQ(tight.input, std::vector<float>({1, 7, 6, 7, 1, 6, 0, 0}));
  EXPECT_EQ(tight.labels, std::vector<float>({7, 6, 7, 2, 6, 2, -100, -100}));

  std::vector<float> source(16), input(16), labels(16);
  Status status = data->Fill(batch, 2, 6, -1, source.data(), input.data(), labels.data());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("longest source is 3 tokens and longest target 4"));
  EXPECT_THAT(status.message(), HasSubstr("T_source 2 and T_target 6"));
  status = data->Fill(batch, 3, 3, -1, source.data(), input.data(), labels.data());
  EXPECT_THAT(status.message(), HasSubstr("T_source 3 and T_target 3"));
  status = data->Fill(BatchOf(*data, {0}), 8, 8, -1, source.data(), input.data(), labels.data());
  EXPECT_TRUE(status.ok()) << status.ToString();
  PairBatch outside;
  outside.indices = {2};
  status = data->Fill(outside, 8, 8, -1, source.data(), input.data(), labels.data());
  EXPECT_THAT(status.message(), HasSubstr("example 2 is out of range [0, 2)"));
}

// The Dataset a network of one input reads: both sides packed in two
// channels at T = max_length, the labels padded with kPairPaddingLabel.
TEST(PairDatasetTest, PackedDatasetPadsToMaxLength) {
  const std::string dir = TempDir("pairs_packed");
  WriteTextFile(dir + "/s", "abc\nb\n");
  WriteTextFile(dir + "/t", "x\nyxy\n");
  auto data = OpenPairDataset(TextPairs(dir + "/s", dir + "/t", 6), Split::kTrain);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  const Dataset& d = **data;
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(d.num_classes(), 8);  // pad, bos, eos, a b c x y
  EXPECT_EQ(d.example_shape(), Shape(1, 2, 1, 6));
  EXPECT_EQ(d.label_shape(), Shape(1, 1, 1, 6));
  // Ids: a 3, b 4, c 5, x 6, y 7.
  std::vector<float> example(12), labels(6);
  auto first = d.Get(1, 0, example.data());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 7);
  EXPECT_EQ(example, std::vector<float>({4, 0, 0, 0, 0, 0,  //
                                         1, 7, 6, 7, 0, 0}));
  ASSERT_TRUE(d.GetPixelLabels(1, labels.data()).ok());
  EXPECT_EQ(labels, std::vector<float>({7, 6, 7, 2, kPairPaddingLabel, kPairPaddingLabel}));
  EXPECT_FALSE(d.Get(2, 0, example.data()).ok());
}

// data.buckets: the packed dataset lists its buckets and orders an epoch in
// whole batches of one bucket, the remainders last; a batch is then cut to
// the bound of its longest pair.
TEST(PairDatasetTest, BucketedOrderGroupsBatchesByLength) {
  PairOptions options = Synthetic("reverse", 203, 1, 15, 11);  // buckets [4, 8, 12, 16]
  auto pairs = Open(options);
  ASSERT_NE(pairs, nullptr);
  auto plain = OpenPairDataset(options, Split::kTrain);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE((*plain)->length_buckets().empty());
  EXPECT_TRUE((*plain)->BatchOrder(8, 1).empty());
  options.buckets = true;
  auto data = OpenPairDataset(options, Split::kTrain);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ((*data)->length_buckets(), std::vector<int64_t>({4, 8, 12, 16}));
  constexpr int64_t kBatch = 8;
  const std::vector<int64_t> order = (*data)->BatchOrder(kBatch, 42);
  ASSERT_EQ(static_cast<int64_t>(order.size()), pairs->size());
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < pairs->size(); ++i) ASSERT_EQ(sorted[i], i);
  // Whole batches first, each of one bucket; then the remainders, fewer
  // than a batch per bucket.
  int64_t whole = 0;
  std::vector<int64_t> per_bucket(4, 0);
  for (int64_t i = 0; i < pairs->size(); ++i) per_bucket[pairs->bucket(i)]++;
  for (int64_t n : per_bucket) whole += n / kBatch;
  for (int64_t b = 0; b < whole; ++b) {
    for (int64_t k = 1; k < kBatch; ++k) {
      ASSERT_EQ(pairs->bucket(order[b * kBatch + k]), pairs->bucket(order[b * kBatch]))
          << "batch " << b;
    }
  }
  EXPECT_NE((*data)->BatchOrder(kBatch, 43), order);
  EXPECT_EQ((*data)->BatchOrder(kBatch, 42), order);
}

TEST(PairDatasetTest, APackedBatchIsCutToItsLongestPair) {
  // Two examples of width 5: "ab" -> "ba" and "c" -> "c".
  std::vector<float> images = {3, 4, 0, 0, 0, 1, 4, 3, 0, 0,   //
                               5, 0, 0, 0, 0, 1, 5, 0, 0, 0};  //
  std::vector<float> labels = {4, 3, 2,  -1, -1,               //
                               5, 2, -1, -1, -1};
  EXPECT_EQ(PackedPairsLength(images, labels, 2, 5), 3);  // "ba" + <eos>
  EXPECT_EQ(PackedPairsLength(images, labels, 1, 5), 3);
  std::vector<float> second_images(images.begin() + 10, images.end());
  std::vector<float> second_labels(labels.begin() + 5, labels.end());
  EXPECT_EQ(PackedPairsLength(second_images, second_labels, 1, 5), 2);
  CropPackedPairs(2, 5, 3, &images, &labels);
  EXPECT_EQ(images, std::vector<float>({3, 4, 0, 1, 4, 3, 5, 0, 0, 1, 5, 0}));
  EXPECT_EQ(labels, std::vector<float>({4, 3, 2, 5, 2, -1}));
  std::vector<float> pad_images(10, 0), pad_labels(5, -1);
  EXPECT_EQ(PackedPairsLength(pad_images, pad_labels, 1, 5), 0);
}

TEST(PairDatasetTest, BadOptionsAreErrors) {
  const std::string dir = TempDir("pairs_options");
  WriteTextFile(dir + "/s", "a\n");
  WriteTextFile(dir + "/t", "b\n");
  PairOptions none;
  none.max_length = 4;
  EXPECT_THAT(OpenError(none), HasSubstr("name exactly one corpus"));
  PairOptions two = TextPairs(dir + "/s", dir + "/t", 4);
  two.synthetic = "reverse";
  EXPECT_THAT(OpenError(two), HasSubstr("name exactly one corpus"));
  PairOptions half = TextPairs(dir + "/s", "", 4);
  EXPECT_THAT(OpenError(half), HasSubstr("needs both a source and a target"));
  for (int64_t max_length : {int64_t{0}, int64_t{-1}, (int64_t{1} << 20) + 1}) {
    EXPECT_THAT(OpenError(TextPairs(dir + "/s", dir + "/t", max_length)),
                HasSubstr(dir + "/s, " + dir + "/t: max_length " + std::to_string(max_length) +
                          " is outside [1, 1048576]"));
  }
  for (const auto& [fraction, text] : std::vector<std::pair<double, std::string>>{
           {-0.1, "-0.1"}, {1.5, "1.5"}, {std::numeric_limits<double>::quiet_NaN(), "nan"}}) {
    PairOptions options = TextPairs(dir + "/s", dir + "/t", 4);
    options.test_fraction = fraction;
    EXPECT_THAT(OpenError(options), HasSubstr("test_fraction " + text + " is outside [0, 1]"));
  }
  PairOptions all_test = TextPairs(dir + "/s", dir + "/t", 4);
  all_test.test_fraction = 1;
  EXPECT_TRUE(OpenPairs(all_test, Split::kTest).ok());
  EXPECT_THAT(OpenError(all_test, Split::kTrain), HasSubstr("the training split has no pairs"));
  EXPECT_THAT(OpenError(Synthetic("reverse", 0, 1, 4, 1)), HasSubstr("synthetic_pairs 0"));
}

}  // namespace
}  // namespace spill
