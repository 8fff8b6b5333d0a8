// Reading and writing NumPy .npz archives (a zip of .npy arrays, stored
// uncompressed), the checkpoint format: `numpy.load("checkpoint.npz")` reads
// it. Zip64 records are written when an archive needs them (over 65,535
// arrays or 4 GiB), as numpy's zipfile expects.
//
// Writes are atomic: the archive goes to a temporary file beside the target,
// is flushed to disk, then renamed over it, so a crash or Ctrl-C never leaves
// a half-written checkpoint in place of a good one.
#ifndef SPILL_FRAMEWORK_IO_NPZ_H_
#define SPILL_FRAMEWORK_IO_NPZ_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

struct NpyArray {
  std::string dtype;  // "<f4", "<i8" or "|u1"
  std::vector<int64_t> shape;
  std::vector<char> data;  // little-endian, C order

  int64_t numel() const;
  static NpyArray Floats(const std::vector<int64_t>& shape, const float* values);
  static NpyArray Int64(int64_t value);
  static NpyArray Text(const std::string& text);  // bytes as uint8
  const float* floats() const { return reinterpret_cast<const float*>(data.data()); }
  int64_t int64() const;
  std::string text() const { return std::string(data.begin(), data.end()); }
};

using NpzArchive = std::map<std::string, NpyArray>;  // name without ".npy"

Status WriteNpzAtomically(const std::string& path, const NpzArchive& arrays);
StatusOr<NpzArchive> ReadNpz(const std::string& path);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_IO_NPZ_H_
