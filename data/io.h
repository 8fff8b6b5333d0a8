// File helpers for the dataset readers. Every failure comes back as a Status
// that names the path and the reason; nothing here aborts or hangs: a file is
// checked to be a regular file before it is read (a FIFO or a folder is an
// error), and reads stop at the size the caller expects, so a gzip bomb
// costs no more than the data it claims to hold.
#ifndef SPILL_DATA_IO_H_
#define SPILL_DATA_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

std::string JoinPath(const std::string& dir, const std::string& name);

// True when `path` exists (a file, a folder or anything else).
bool PathExists(const std::string& path);

// Sequential reading of a regular file, gunzipped when its name ends in ".gz".
class FileReader {
 public:
  static StatusOr<std::unique_ptr<FileReader>> Open(const std::string& path);
  virtual ~FileReader() = default;

  // Appends up to `count` bytes to `bytes`; fewer only at the end of the
  // content. A truncated or corrupt gzip stream is an error.
  virtual StatusOr<uint64_t> Read(uint64_t count, std::vector<uint8_t>* bytes) = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit FileReader(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Appends the whole content of `path` to `bytes` (see FileReader); content of
// more than `max_bytes` bytes is an error that names the limit.
Status AppendFile(const std::string& path, std::vector<uint8_t>* bytes, uint64_t max_bytes);

// Ok when 0 <= index < size; otherwise an error naming the example, the
// range and `source` (the dataset's file or description).
Status CheckExampleIndex(int64_t index, int64_t size, const std::string& source);

// Big-endian 32-bit value at `data` (idx headers).
inline uint32_t ReadBigEndian32(const uint8_t* data) {
  return (static_cast<uint32_t>(data[0]) << 24) | (static_cast<uint32_t>(data[1]) << 16) |
         (static_cast<uint32_t>(data[2]) << 8) | static_cast<uint32_t>(data[3]);
}

}  // namespace spill

#endif  // SPILL_DATA_IO_H_
