// Datasets: random access to labeled images in their real on-disk formats.
//
//   fashion_mnist / mnist   idx files (gzipped or not): train-images-idx3-ubyte[.gz], ...
//   cifar10                 the binary version: data_batch_1..5.bin, test_batch.bin
//   image_folder            ImageNet-style class folders of JPEG/PNG: root/<class>/<image>
//   text                    a text file or a folder of them: windows of characters, each
//                           position labeled with the next character (OpenCharText)
//
// Get() is thread-safe and deterministic: the same (index, augment_seed)
// always yields the same pixels, so shuffling and augmentation are
// reproducible and a resumed run sees exactly the batches an uninterrupted
// one would.
#ifndef SPILL_DATA_DATASET_H_
#define SPILL_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/status.h"
#include "framework/device/tensor.h"

namespace spill {

enum class Split { kTrain, kTest };

// Transforms applied to each example, in this order.
struct Augmentation {
  // image_folder: resize so the shorter side is `resize` (0 = keep size).
  int resize = 0;
  // Crop size (0 = no crop). Training takes a random crop, evaluation the
  // centre. `pad` pixels of zeros are added on every side first (CIFAR's 4).
  int crop = 0;
  int pad = 0;
  bool random_crop = false;  // false: centre crop
  bool flip = false;         // random horizontal flip (training only)
  // Per-channel normalization after scaling pixels to [0, 1]:
  // (x - mean) / std. Empty = dataset defaults (see each Open* function).
  std::vector<float> mean;
  std::vector<float> std;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;
  // C x H x W of one example after augmentation (N = 1).
  virtual Shape example_shape() const = 0;
  virtual std::string Describe() const = 0;

  // Writes example `index` (C*H*W floats, NCHW) into `image` and returns its
  // label. `augment_seed` drives the random crop and flip.
  virtual StatusOr<int> Get(int64_t index, uint64_t augment_seed, float* image) const = 0;

  // Segmentation datasets label every pixel: 1 x 1 x H x W classes per
  // example, text a symbol per position: 1 x 1 x 1 x T (the others, one
  // class: 1 x 1 x 1 x 1), which GetPixelLabels writes for example `index`.
  virtual Shape label_shape() const { return Shape(1, 1, 1, 1); }
  virtual Status GetPixelLabels(int64_t index, float* labels) const;

  // Sequences grouped by length (data.buckets): the increasing bounds of the
  // length buckets, a batch being cut to the first bound that holds its
  // longest example (CropPackedPairs); empty for the others.
  virtual std::vector<int64_t> length_buckets() const { return {}; }
  // The order of an epoch's examples for batches of `batch` when the
  // dataset has one - each run of `batch` positions from one length bucket -
  // drawn from `seed`; empty: the loader's shuffle.
  virtual std::vector<int64_t> BatchOrder(int64_t batch, uint64_t seed) const { return {}; }
};

// Reads the idx files of `split` from `dir` (train-* or t10k-*), gzipped or
// not. Pixels are scaled to [0, 1] then normalized with mean 0.2860 /
// std 0.3530 (Fashion-MNIST) unless `augment` says otherwise.
StatusOr<std::unique_ptr<Dataset>> OpenIdx(const std::string& dir, Split split,
                                           const Augmentation& augment, bool fashion = true);

// Reads CIFAR-10's binary batches from `dir`. Defaults: mean
// (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616).
StatusOr<std::unique_ptr<Dataset>> OpenCifar10(const std::string& dir, Split split,
                                               const Augmentation& augment);

// Segmentation on idx files: the images (and classes) of `images_dir` as
// OpenIdx reads them, and a class per pixel from
// `masks_dir`/{train,t10k}-masks-idx3-ubyte - idx files of unsigned bytes,
// N x H x W, as many masks as images and of their size. When a split's mask
// file is missing it is made from the images first (written to a temporary
// file, then renamed): each pixel brighter than a quarter of full scale is
// its garment's (or digit's) class + 1, the rest 0, background - 11
// classes, the segmentation task of the U-Net config. The only augmentation
// is `augment.pad`, which pads masks with background alike (28x28 images
// padded by 2 give the 32x32 that four poolings halve evenly).
StatusOr<std::unique_ptr<Dataset>> OpenIdxSegmentation(const std::string& images_dir,
                                                       const std::string& masks_dir, Split split,
                                                       const Augmentation& augment,
                                                       bool fashion = true);

// Lists `dir`/<class>/<image> (classes sorted by name; .jpg .jpeg .png).
// Images are decoded when read. Defaults: ImageNet's mean (0.485, 0.456,
// 0.406) and std (0.229, 0.224, 0.225); `augment.crop` must be set.
StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(const std::string& dir,
                                                   const Augmentation& augment);

// Character-level text for language models (OpenCharText).
struct TextOptions {
  // A text file (gunzipped when its name ends in .gz), or a folder: every
  // regular file directly in it - not symbolic links, subfolders, hidden
  // names or names ending in .dat (the index files of Debian's fortunes
  // package) - concatenated in name order (byte order).
  std::string path;
  int64_t sequence = 0;         // T: symbols per example, 1..2^20
  double test_fraction = 0.05;  // the corpus's last bytes that are the test split, (0, 0.5]
  // B > 0: the split as B contiguous streams for truncated back-propagation
  // through time (see OpenCharText); 0: consecutive windows.
  int64_t streams = 0;
  // A file whose distinct bytes are the symbols ("" = those of the corpus).
  std::string vocabulary;
};

// Windows of T symbols of the text at `options.path`. The vocabulary is the
// sorted distinct bytes of the whole corpus (both splits, so V is the same
// for both) or of `options.vocabulary`; a symbol's id is its rank in it, so
// num_classes() = V <= 256, and a corpus byte outside a given vocabulary is
// an error naming the file, the byte's offset in it and its value.
//
// The split is cut at a byte boundary: the last floor(test_fraction * bytes)
// bytes of the corpus are the test split, the rest the training split (a
// character of several UTF-8 bytes may straddle the cut; symbols are bytes).
//
// An example is 1 x 1 x 1 x T symbol ids as floats (0..V-1) along W; its
// labels (label_shape 1 x 1 x 1 x T, GetPixelLabels) are the ids of the next
// byte at each position - the same bytes shifted by one. Get returns the
// first label. With S bytes in the split:
//   streams = 0: example i is the window at offset i*T (inputs [iT, iT+T),
//     labels [iT+1, iT+T+1)); size() = (S - 1) / T.
//   streams = B: the split is B contiguous streams of L = ((S-1) / B / T) * T
//     bytes each; example i = b*B + r is stream r's b-th window, at offset
//     r*L + b*T; size() = B * (L / T). A loader with batch B and shuffle off
//     then puts stream r in row r of every batch, batch b continuing batch
//     b-1 where it stopped, so a recurrent network can carry its hidden
//     state from batch to batch.
// Everything is read and checked at open; Get and GetPixelLabels only copy.
StatusOr<std::unique_ptr<Dataset>> OpenCharText(const TextOptions& options, Split split);

// The symbols of the vocabulary file at `path`: its distinct bytes, sorted
// (an empty file is an error naming it).
StatusOr<std::vector<uint8_t>> ReadCharVocabulary(const std::string& path);

}  // namespace spill

#endif  // SPILL_DATA_DATASET_H_
