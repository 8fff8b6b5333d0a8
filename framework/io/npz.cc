#include "framework/io/npz.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>

#include "framework/base/checked_math.h"
#include "framework/base/files.h"
#include "framework/base/units.h"

namespace spill {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint64_t kMax32 = 0xFFFFFFFFull;
constexpr uint64_t kMaxEntries16 = 0xFFFF;

void Put16(std::string* out, uint16_t v) { out->append(reinterpret_cast<const char*>(&v), 2); }
void Put32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void Put64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

std::string NpyHeader(const NpyArray& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) {
    shape += std::to_string(array.shape[i]) +
             (array.shape.size() == 1 ? "," : (i + 1 < array.shape.size() ? ", " : ""));
  }
  shape += ")";
  std::string dict =
      "{'descr': '" + array.dtype + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + dict.size() + 1;  // magic(6) version(2) length(2) dict '\n'
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string header = "\x93NUMPY";
  header += '\x01';
  header += '\x00';
  Put16(&header, static_cast<uint16_t>(dict.size()));
  return header + dict;
}

struct Entry {
  std::string name;
  uint32_t crc;
  uint64_t size;
  uint64_t offset;
};

// A local or central header; zip64 fields go into an extra record when a
// size or offset does not fit 32 bits.
std::string Header(const Entry& e, bool central) {
  const bool big = e.size > kMax32 || e.offset > kMax32;
  std::string extra;
  if (big) {
    Put16(&extra, kZip64ExtraId);
    Put16(&extra, central ? 24 : 16);
    Put64(&extra, e.size);
    Put64(&extra, e.size);
    if (central) Put64(&extra, e.offset);
  }
  std::string h;
  Put32(&h, central ? kCentralHeader : kLocalHeader);
  if (central) Put16(&h, big ? 45 : 20);  // version made by
  Put16(&h, big ? 45 : 20);               // version needed
  Put16(&h, 0);                           // flags
  Put16(&h, 0);                           // stored
  Put16(&h, 0);                           // time
  Put16(&h, 0x21);                        // date: 1980-01-01
  Put32(&h, e.crc);
  Put32(&h, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(e.size));
  Put32(&h, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(e.size));
  Put16(&h, static_cast<uint16_t>(e.name.size()));
  Put16(&h, static_cast<uint16_t>(extra.size()));
  if (central) {
    Put16(&h, 0);  // comment
    Put16(&h, 0);  // disk
    Put16(&h, 0);  // internal attributes
    Put32(&h, 0);  // external attributes
    Put32(&h, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(e.offset));
  }
  return h + e.name + extra;
}

std::string EndRecords(uint64_t entries, uint64_t directory_size, uint64_t directory_offset) {
  std::string out;
  const bool big = entries > kMaxEntries16 || directory_size > kMax32 || directory_offset > kMax32;
  if (big) {
    uint64_t zip64_offset = directory_offset + directory_size;
    Put32(&out, kZip64EndOfDirectory);
    Put64(&out, 44);
    Put16(&out, 45);
    Put16(&out, 45);
    Put32(&out, 0);
    Put32(&out, 0);
    Put64(&out, entries);
    Put64(&out, entries);
    Put64(&out, directory_size);
    Put64(&out, directory_offset);
    Put32(&out, kZip64Locator);
    Put32(&out, 0);
    Put64(&out, zip64_offset);
    Put32(&out, 1);
  }
  Put32(&out, kEndOfDirectory);
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, big ? 0xFFFF : static_cast<uint16_t>(entries));
  Put16(&out, big ? 0xFFFF : static_cast<uint16_t>(entries));
  Put32(&out, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(directory_size));
  Put32(&out, big ? static_cast<uint32_t>(kMax32) : static_cast<uint32_t>(directory_offset));
  Put16(&out, 0);
  return out;
}

class FileWriter {
 public:
  explicit FileWriter(const std::string& path)
      : path_(path), file_(std::fopen(path.c_str(), "wb")) {
    if (file_ == nullptr) error_ = errno;
  }
  ~FileWriter() {
    if (file_) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr && error_ == 0; }
  // The errno of the first failure (0 while none).
  int error() const { return error_; }
  uint64_t position() const { return position_; }
  void Write(const void* data, size_t bytes) {
    if (!ok()) return;
    if (std::fwrite(data, 1, bytes, file_) != bytes) Fail();
    position_ += bytes;
  }
  void Write(const std::string& s) { Write(s.data(), s.size()); }
  // Flushes to the disk and closes.
  bool Close() {
    if (!file_) return false;
    if (ok() && std::fflush(file_) != 0) Fail();
    if (ok() && fsync(fileno(file_)) != 0) Fail();
    if (std::fclose(file_) != 0 && error_ == 0) Fail();
    file_ = nullptr;
    return error_ == 0;
  }

 private:
  void Fail() { error_ = errno != 0 ? errno : EIO; }

  std::string path_;
  FILE* file_;
  int error_ = 0;
  uint64_t position_ = 0;
};

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

NpyArray NpyArray::Floats(const std::vector<int64_t>& shape, const float* values) {
  NpyArray a{"<f4", shape, {}};
  a.data.assign(reinterpret_cast<const char*>(values),
                reinterpret_cast<const char*>(values + a.numel()));
  return a;
}

NpyArray NpyArray::Int64(int64_t value) {
  NpyArray a{"<i8", {1}, {}};
  a.data.assign(reinterpret_cast<const char*>(&value), reinterpret_cast<const char*>(&value + 1));
  return a;
}

NpyArray NpyArray::Text(const std::string& text) {
  return NpyArray{
      "|u1", {static_cast<int64_t>(text.size())}, std::vector<char>(text.begin(), text.end())};
}

int64_t NpyArray::int64() const {
  int64_t v = 0;
  if (dtype == "<i8" && data.size() >= 8) std::memcpy(&v, data.data(), 8);
  return v;
}

Status WriteNpzAtomically(const std::string& path, const NpzArchive& arrays) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  SPILL_RETURN_IF_ERROR(CheckReplaceable(path, "npz archive"));
  const std::string temp = path + ".tmp";
  std::vector<Entry> entries;
  {
    FileWriter out(temp);
    if (!out.ok()) return IoError("cannot create '" + temp + "': " + std::strerror(out.error()));
    for (const auto& [name, array] : arrays) {
      std::string header = NpyHeader(array);
      Entry e{name + ".npy", 0, header.size() + array.data.size(), out.position()};
      uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(header.data()), header.size());
      // crc32 takes 32-bit lengths: feed large arrays in pieces.
      for (size_t done = 0; done < array.data.size();) {
        size_t piece = std::min<size_t>(array.data.size() - done, 1u << 30);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(array.data.data() + done), piece);
        done += piece;
      }
      e.crc = static_cast<uint32_t>(crc);
      out.Write(Header(e, false));
      out.Write(header);
      out.Write(array.data.data(), array.data.size());
      entries.push_back(e);
    }
    const uint64_t directory_offset = out.position();
    for (const Entry& e : entries) out.Write(Header(e, true));
    const uint64_t directory_size = out.position() - directory_offset;
    out.Write(EndRecords(entries.size(), directory_size, directory_offset));
    if (!out.Close()) {
      fs::remove(temp, ec);
      return WriteError(path, "npz archive", out.error());
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    fs::remove(temp, ec);
    return WriteError(path, "npz archive", error);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Reading. Policy: every offset and size read from the file is checked
// against the file before it is used, with arithmetic that cannot wrap; each
// entry's CRC-32 is verified; only stored .npy entries of the three dtypes the
// writer uses are accepted, with a header parsed field by field.

namespace {

constexpr uint64_t kMaxCheckpointBytes = uint64_t{1} << 40;  // 1 TiB
constexpr uint64_t kEndRecord = 22;                          // bytes of the end record
constexpr uint64_t kCentralRecord = 46;
constexpr uint64_t kLocalRecord = 30;
constexpr uint64_t kZip64EndRecord = 56;
constexpr size_t kMaxDims = 8;
constexpr size_t kCrcPiece = size_t{1} << 30;  // crc32 takes 32-bit lengths

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

class Reader {
 public:
  Reader(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}

  StatusOr<NpzArchive> Read() {
    uint64_t entries = 0, at = 0;
    SPILL_RETURN_IF_ERROR(Directory(&entries, &at));
    NpzArchive archive;
    for (uint64_t i = 0; i < entries; ++i) SPILL_RETURN_IF_ERROR(Entry(&at, &archive));
    return archive;
  }

 private:
  Status Bad(const std::string& what) const {
    return InvalidArgument("'" + path_ + "' is not a readable .npz checkpoint: " + what);
  }
  // [at, at + n) lies inside the file.
  bool Has(uint64_t at, uint64_t n) const { return at <= bytes_.size() && n <= bytes_.size() - at; }
  uint64_t U16(uint64_t at) const { return Le(at, 2); }
  uint64_t U32(uint64_t at) const { return Le(at, 4); }
  uint64_t U64(uint64_t at) const { return Le(at, 8); }
  uint64_t Le(uint64_t at, int bytes) const {
    uint64_t v = 0;
    if (!Has(at, bytes)) return 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes_[at + i]);
    return v;
  }

  // Finds the end records; sets the entry count and the directory's offset.
  Status Directory(uint64_t* entries, uint64_t* offset) const {
    if (bytes_.size() < kEndRecord) return Bad("too short for a zip archive");
    const size_t end = bytes_.rfind(std::string("PK\x05\x06", 4), bytes_.size() - kEndRecord);
    if (end == std::string::npos) return Bad("no zip end-of-directory record");
    *entries = U16(end + 10);
    *offset = U32(end + 16);
    if (end >= 20 && U32(end - 20) == kZip64Locator) {
      const uint64_t zip64 = U64(end - 20 + 8);
      if (!Has(zip64, kZip64EndRecord) || U32(zip64) != kZip64EndOfDirectory) {
        return Bad("bad zip64 record");
      }
      *entries = U64(zip64 + 32);
      *offset = U64(zip64 + 48);
    }
    if (*entries > bytes_.size() / kCentralRecord) {
      return Bad("the directory claims " + std::to_string(*entries) +
                 " entries, more than the file can hold");
    }
    return Status::Ok();
  }

  // Zip64 sizes and offset from an extra field, where the 32-bit ones are full.
  void ParseZip64(uint64_t at, uint64_t len, uint64_t* size, uint64_t* compressed,
                  uint64_t* offset) const {
    for (uint64_t end = at + len; at + 4 <= end;) {
      const uint64_t id = U16(at), n = U16(at + 2);
      if (id == kZip64ExtraId) {
        uint64_t p = at + 4;
        const uint64_t stop = std::min(end, at + 4 + n);
        for (uint64_t* field : {size, compressed, offset}) {
          if (*field != kMax32) continue;
          if (p + 8 > stop) break;
          *field = U64(p);
          p += 8;
        }
      }
      at += 4 + n;
    }
  }

  // Reads the central entry at `*at` and its data; advances `*at`.
  Status Entry(uint64_t* at, NpzArchive* archive) const {
    const uint64_t c = *at;
    if (!Has(c, kCentralRecord) || U32(c) != kCentralHeader) return Bad("bad central directory");
    const uint64_t name_len = U16(c + 28), extra_len = U16(c + 30), comment_len = U16(c + 32);
    if (!Has(c + kCentralRecord, name_len + extra_len + comment_len)) {
      return Bad("truncated central directory");
    }
    std::string name = bytes_.substr(c + kCentralRecord, name_len);
    if ((U16(c + 8) & 1) != 0) return Bad("'" + name + "' is encrypted");
    if (U16(c + 10) != 0) {
      return Bad("'" + name + "' is compressed (save with numpy.savez, not savez_compressed)");
    }
    const uint64_t crc = U32(c + 16);
    uint64_t compressed = U32(c + 20), size = U32(c + 24), offset = U32(c + 42);
    ParseZip64(c + kCentralRecord + name_len, extra_len, &size, &compressed, &offset);
    *at = c + kCentralRecord + name_len + extra_len + comment_len;
    if (!Has(offset, kLocalRecord) || U32(offset) != kLocalHeader) {
      return Bad("bad local header of '" + name + "'");
    }
    const uint64_t data = offset + kLocalRecord + U16(offset + 26) + U16(offset + 28);
    if (!Has(data, size)) return Bad("'" + name + "' is truncated");
    uLong actual = crc32(0L, Z_NULL, 0);
    for (uint64_t done = 0; done < size;) {
      const uint64_t piece = std::min<uint64_t>(size - done, kCrcPiece);
      actual = crc32(actual, reinterpret_cast<const Bytef*>(bytes_.data() + data + done),
                     static_cast<uInt>(piece));
      done += piece;
    }
    if (actual != crc) return Bad("'" + name + "' fails its CRC-32 check (the file is corrupt)");
    if (!EndsWith(name, ".npy") || name.size() == 4)
      return Bad("'" + name + "' is not a .npy array");
    name.resize(name.size() - 4);
    if (archive->count(name)) return Bad("'" + name + "' appears twice");
    SPILL_ASSIGN_OR_RETURN(NpyArray array, ParseNpy(name, data, size));
    (*archive)[name] = std::move(array);
    return Status::Ok();
  }

  // The value of `key` in a .npy header dict, up to the next ',' or '}' ('('
  // to ')' for the shape).
  StatusOr<std::string> Field(const std::string& header, const std::string& key,
                              const std::string& name) const {
    const size_t k = header.find("'" + key + "'");
    const size_t colon = k == std::string::npos ? k : header.find(':', k);
    if (colon == std::string::npos) return Bad("'" + name + "' has no " + key);
    const size_t open = header.find_first_not_of(" ", colon + 1);
    if (open == std::string::npos) return Bad("'" + name + "' has a bad " + key);
    const bool tuple = header[open] == '(';
    const size_t close = tuple ? header.find(')', open) : header.find_first_of(",}", open);
    if (close == std::string::npos) return Bad("'" + name + "' has a bad " + key);
    return Trim(header.substr(open + (tuple ? 1 : 0), close - open - (tuple ? 1 : 0)));
  }

  StatusOr<std::vector<int64_t>> Shape(const std::string& text, const std::string& name) const {
    std::vector<int64_t> shape;
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string item = Trim(text.substr(start, comma - start));
      start = comma + 1;
      if (item.empty()) continue;
      auto dim = ParseDim(item);
      if (!dim.ok() || shape.size() == kMaxDims) {
        return Bad("'" + name + "' has a bad shape (" + text + ")");
      }
      shape.push_back(*dim);
    }
    return shape;
  }

  static StatusOr<int64_t> ParseDim(const std::string& item) {
    auto dim = ParseInt64(item);
    if (!dim.ok() || *dim < 0) return InvalidArgument("bad dimension");
    return dim;
  }

  StatusOr<NpyArray> ParseNpy(const std::string& name, uint64_t at, uint64_t size) const {
    if (size < 10 || bytes_.compare(at, 6, "\x93NUMPY") != 0) {
      return Bad("'" + name + "' is not a .npy array");
    }
    const int major = static_cast<unsigned char>(bytes_[at + 6]);
    if (major < 1 || major > 3 || (major > 1 && size < 12)) {
      return Bad("'" + name + "' has an unsupported .npy version " + std::to_string(major));
    }
    const uint64_t header_len = major == 1 ? U16(at + 8) : U32(at + 8);
    const uint64_t header_at = at + (major == 1 ? 10 : 12);
    if (header_len > size - (header_at - at)) return Bad("'" + name + "' has a truncated header");
    const std::string header = bytes_.substr(header_at, header_len);
    NpyArray array;
    SPILL_ASSIGN_OR_RETURN(std::string descr, Field(header, "descr", name));
    if (descr.size() < 2 || (descr[0] != '\'' && descr[0] != '"') || descr.back() != descr[0]) {
      return Bad("'" + name + "' has a bad dtype");
    }
    array.dtype = descr.substr(1, descr.size() - 2);
    const int64_t element = array.dtype == "<f4"   ? 4
                            : array.dtype == "<i8" ? 8
                            : array.dtype == "|u1" ? 1
                                                   : 0;
    if (element == 0) return Bad("'" + name + "' has unsupported dtype " + array.dtype);
    SPILL_ASSIGN_OR_RETURN(std::string fortran, Field(header, "fortran_order", name));
    if (fortran != "False") return Bad("'" + name + "' is not in C order");
    SPILL_ASSIGN_OR_RETURN(std::string shape, Field(header, "shape", name));
    SPILL_ASSIGN_OR_RETURN(array.shape, Shape(shape, name));
    int64_t bytes = element;
    for (int64_t d : array.shape) {
      if (!CheckedMul(bytes, d, &bytes)) return Bad("'" + name + "' has an impossible shape");
    }
    const uint64_t data_at = header_at + header_len, data_size = size - (data_at - at);
    if (static_cast<uint64_t>(bytes) != data_size) {
      return Bad("'" + name + "' holds " + std::to_string(data_size) +
                 " bytes of data; its shape (" + shape + ") and dtype need " +
                 std::to_string(bytes));
    }
    array.data.assign(bytes_.begin() + data_at, bytes_.begin() + data_at + data_size);
    return array;
  }

  const std::string& path_;
  const std::string& bytes_;
};

}  // namespace

StatusOr<NpzArchive> ReadNpz(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(std::string bytes,
                         ReadFileToString(path, kMaxCheckpointBytes, "checkpoint"));
  try {
    return Reader(path, bytes).Read();
  } catch (const std::bad_alloc&) {
    return OutOfMemory("not enough memory to read checkpoint '" + path + "'");
  }
}

}  // namespace spill
