// File helpers for the dataset readers. Every failure comes back as a Status
// that names the path and the reason; nothing here aborts.
#ifndef SPILL_DATA_IO_H_
#define SPILL_DATA_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/status.h"

namespace spill {

std::string JoinPath(const std::string& dir, const std::string& name);

// True when `path` exists (a file, a folder or anything else).
bool PathExists(const std::string& path);

// Appends the whole content of `path` to `bytes`, gunzipping it when the name
// ends in ".gz". A truncated or corrupt gzip stream is an error.
Status AppendFile(const std::string& path, std::vector<uint8_t>* bytes);

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
