// The batch loader on an in-memory dataset: order, shuffling, resume,
// drop_last, worker invariance, errors and shutdown.
#include "data/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/dataset.h"
#include "tests/testing/data_files.h"

namespace spill {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::WriteCifar;

// ------------------------------------------------------------------- loader

// Example i is {i, augment seed's top 24 bits}; label i % 7; index 13 fails
// when `fail` is set.
class FakeDataset : public Dataset {
 public:
  explicit FakeDataset(int64_t size, bool fail = false) : size_(size), fail_(fail) {}
  int64_t size() const override { return size_; }
  int num_classes() const override { return 7; }
  Shape example_shape() const override { return Shape(1, 2, 1, 1); }
  std::string Describe() const override { return "fake"; }
  StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const override {
    if (fail_ && index == 13) return IoError("/fake/13.png: cannot decode");
    image[0] = static_cast<float>(index);
    image[1] = static_cast<float>(augment_seed >> 40);
    return static_cast<int>(index % 7);
  }

 private:
  int64_t size_;
  bool fail_;
};

LoaderOptions Options(int64_t batch, bool shuffle, bool drop_last, uint64_t seed = 1,
                      int workers = 1, int prefetch = 4) {
  LoaderOptions options;
  options.batch = batch;
  options.shuffle = shuffle;
  options.drop_last = drop_last;
  options.seed = seed;
  options.workers = workers;
  options.prefetch = prefetch;
  return options;
}

// The next `count` batches, all of which must succeed.
std::vector<Batch> Take(Loader* loader, int count) {
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) {
    StatusOr<Batch> batch = loader->Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    batches.push_back(std::move(batch).value());
  }
  return batches;
}

// Dataset indices of an epoch's batches, in order.
std::vector<int64_t> Indices(const std::vector<Batch>& batches) {
  std::vector<int64_t> indices;
  for (const Batch& batch : batches) {
    for (int64_t i = 0; i < batch.size; ++i)
      indices.push_back(static_cast<int64_t>(batch.images[2 * i]));
  }
  return indices;
}

void ExpectSame(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].epoch, b[i].epoch);
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].size, b[i].size);
    EXPECT_EQ(a[i].labels, b[i].labels);
    EXPECT_EQ(a[i].images, b[i].images) << "batch " << i;
  }
}

TEST(LoaderTest, WithoutShuffleVisitsInOrder) {
  FakeDataset dataset(10);
  Loader loader(dataset, Options(4, false, false));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 6);
  ASSERT_EQ(batches.size(), 6u);
  for (int b = 0; b < 6; ++b) {
    EXPECT_EQ(batches[b].epoch, b / 3);
    EXPECT_EQ(batches[b].index, b % 3);
    EXPECT_EQ(batches[b].size, b % 3 == 2 ? 2 : 4);
    EXPECT_EQ(batches[b].images.size(), static_cast<size_t>(2 * batches[b].size));
  }
  std::vector<int64_t> expected(10);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(Indices({batches.begin(), batches.begin() + 3}), expected);
  EXPECT_EQ(Indices({batches.begin() + 3, batches.end()}), expected);
  EXPECT_EQ(batches[1].labels, (std::vector<float>{4, 5, 6, 0}));
}

TEST(LoaderTest, ShuffleIsAPermutationDifferentEachEpochAndSeeded) {
  FakeDataset dataset(100);
  Loader loader(dataset, Options(10, true, false, 5));
  std::vector<Batch> batches = Take(&loader, 20);  // Next() without Start() starts at 0
  std::vector<int64_t> epoch0 = Indices({batches.begin(), batches.begin() + 10});
  std::vector<int64_t> epoch1 = Indices({batches.begin() + 10, batches.end()});
  std::vector<int64_t> sorted0 = epoch0, sorted1 = epoch1, expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  std::sort(sorted0.begin(), sorted0.end());
  std::sort(sorted1.begin(), sorted1.end());
  EXPECT_EQ(sorted0, expected);
  EXPECT_EQ(sorted1, expected);
  EXPECT_NE(epoch0, expected);
  EXPECT_NE(epoch0, epoch1);

  Loader same(dataset, Options(10, true, false, 5));
  same.Start(0, 0);
  ExpectSame(Take(&same, 20), batches);
  Loader other(dataset, Options(10, true, false, 6));
  other.Start(0, 0);
  EXPECT_NE(Indices(Take(&other, 10)), epoch0);
}

TEST(LoaderTest, AugmentSeedsFollowEpochAndPosition) {
  FakeDataset dataset(8);
  Loader loader(dataset, Options(4, true, true, 3));
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 4);
  std::set<float> seeds;
  for (const Batch& batch : batches) {
    for (int64_t i = 0; i < batch.size; ++i) seeds.insert(batch.images[2 * i + 1]);
  }
  EXPECT_EQ(seeds.size(), 16u);  // distinct per (epoch, position)
}

TEST(LoaderTest, DropLastSkipsThePartialBatch) {
  FakeDataset dataset(10);
  Loader loader(dataset, Options(4, false, true));
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  loader.Start(0, 0);
  std::vector<Batch> batches = Take(&loader, 3);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[1].size, 4);
  EXPECT_EQ(batches[2].epoch, 1);
  EXPECT_EQ(batches[2].index, 0);
  EXPECT_EQ(Indices({batches[2]}), (std::vector<int64_t>{0, 1, 2, 3}));

  FakeDataset tiny(3);
  Loader empty(tiny, Options(4, true, true));
  EXPECT_EQ(empty.batches_per_epoch(), 0);
  empty.Start(0, 0);
  EXPECT_FALSE(empty.Next().ok());  // an error, not a hang
  Loader partial(tiny, Options(4, true, false));
  ASSERT_EQ(partial.batches_per_epoch(), 1);
  EXPECT_EQ(Take(&partial, 1)[0].size, 3);
}

TEST(LoaderTest, ResumeMidEpochYieldsTheSameBatches) {
  FakeDataset dataset(50);
  for (bool drop_last : {true, false}) {
    Loader full(dataset, Options(8, true, drop_last, 11));
    const int per_epoch = static_cast<int>(full.batches_per_epoch());
    full.Start(0, 0);
    std::vector<Batch> all = Take(&full, 3 * per_epoch);
    for (int k : {0, 1, per_epoch - 1}) {
      Loader resumed(dataset, Options(8, true, drop_last, 11));
      resumed.Start(1, k);
      ExpectSame(Take(&resumed, 2 * per_epoch - k), {all.begin() + per_epoch + k, all.end()});
    }
    // Restarting a running loader jumps to the new position.
    full.Start(2, 1);
    ExpectSame(Take(&full, 1), {all[2 * per_epoch + 1]});
  }
}

TEST(LoaderTest, WorkersAndPrefetchDoNotChangeTheBatches) {
  std::string dir = WriteCifar("loader_workers");
  Augmentation augment;
  augment.pad = 4;
  augment.crop = 32;
  augment.random_crop = true;
  augment.flip = true;
  auto train = OpenCifar10(dir, Split::kTrain, augment);
  ASSERT_TRUE(train.ok());
  Loader one(**train, Options(3, true, false, 7, 1, 1));
  one.Start(0, 0);
  std::vector<Batch> expected = Take(&one, 12);
  for (int workers : {2, 4}) {
    Loader many(**train, Options(3, true, false, 7, workers, 3));
    many.Start(0, 0);
    ExpectSame(Take(&many, 12), expected);
  }
  // Resuming an augmenting, shuffling loader reproduces the pixels too.
  Loader resumed(**train, Options(3, true, false, 7, 3, 2));
  resumed.Start(1, 2);
  ExpectSame(Take(&resumed, 6), {expected.begin() + 6, expected.end()});
}

TEST(LoaderTest, ErrorsComeOutOfNextAndLaterBatchesFollow) {
  FakeDataset dataset(20, /*fail=*/true);
  Loader loader(dataset, Options(5, false, true, 1, 3, 2));
  loader.Start(0, 0);
  EXPECT_TRUE(loader.Next().ok());
  EXPECT_TRUE(loader.Next().ok());
  StatusOr<Batch> bad = loader.Next();  // holds index 13
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("/fake/13.png"));
  StatusOr<Batch> next = loader.Next();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->index, 3);
}

TEST(LoaderTest, DestroysCleanlyWhileWorkersWait) {
  FakeDataset dataset(1000);
  for (int i = 0; i < 20; ++i) {
    Loader loader(dataset, Options(10, true, true, i, 4, 8));
    loader.Start(0, 0);
    if (i % 2 == 0) {
      EXPECT_TRUE(loader.Next().ok());
    }
  }
  Loader never_started(dataset, Options(10, true, true));
}

}  // namespace
}  // namespace spill
