// GNU gettext binary catalogs (.mo), read for data/pair_dataset.h
// (ReadMoCatalog). The layout, in the file's own byte order (the magic
// number tells which):
//
//   offset  0  magic 0x950412de
//           4  revision (major << 16 | minor; majors 0 and 1 exist)
//           8  N, the number of messages
//          12  O, offset of the table of originals (msgid)
//          16  T, offset of the table of translations (msgstr)
//   at O and T: N x (length, offset), each string `length` bytes at `offset`
//   (followed by a NUL that is not counted)
//
// The hash table after T is not needed for reading every message and is
// ignored. A catalog comes from anywhere, so nothing here trusts a number
// read from it: every table and string is checked against the file's size in
// 64-bit arithmetic (no 32-bit sum can wrap) before a byte of it is touched.
#include <cstdio>
#include <string>
#include <vector>

#include "data/io.h"
#include "data/pair_dataset.h"

namespace spill {
namespace {

constexpr uint32_t kMoMagic = 0x950412de;
constexpr uint32_t kMoMagicSwapped = 0xde120495;
constexpr uint64_t kMoHeaderBytes = 20;  // magic .. T; the hash fields are unused
constexpr uint64_t kMoEntryBytes = 8;    // (length, offset)
constexpr uint32_t kMaxMajorRevision = 1;
constexpr uint64_t kMaxCatalogBytes = uint64_t{1} << 28;  // 256 MiB: catalogs are kilobytes
constexpr char kContextSeparator = '\x04';                // msgctxt EOT msgid

std::string Hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", value);
  return text;
}

// The catalog's bytes and the byte order of its numbers.
class MoImage {
 public:
  MoImage(std::string path, std::vector<uint8_t> bytes, bool big_endian)
      : path_(std::move(path)), bytes_(std::move(bytes)), big_endian_(big_endian) {}

  uint64_t size() const { return bytes_.size(); }
  const std::string& path() const { return path_; }

  // The 32-bit number at `offset`; offset + 4 <= size().
  uint32_t Word(uint64_t offset) const {
    const uint8_t* p = bytes_.data() + offset;
    if (big_endian_) return ReadBigEndian32(p);
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
  }

  // String `entry` of the table at `table` (`what`: msgid or msgstr), checked.
  StatusOr<std::string> String(uint64_t table, uint32_t entry, const char* what) const {
    const uint64_t at = table + kMoEntryBytes * entry;
    const uint64_t length = Word(at);
    const uint64_t offset = Word(at + 4);
    if (offset > size() || length > size() - offset) {
      return InvalidArgument(path_ + ": entry " + std::to_string(entry) + ": its " + what + " (" +
                             std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                             ") runs past the end of the file (" + std::to_string(size()) +
                             " bytes); the catalog is damaged");
    }
    return std::string(reinterpret_cast<const char*>(bytes_.data()) + offset, length);
  }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  bool big_endian_;
};

StatusOr<MoImage> ReadImage(const std::string& path) {
  std::vector<uint8_t> bytes;
  SPILL_RETURN_IF_ERROR(AppendFile(path, &bytes, kMaxCatalogBytes));
  if (bytes.size() < kMoHeaderBytes) {
    return InvalidArgument(path + " is " + std::to_string(bytes.size()) +
                           " bytes, too short for the header of a gettext catalog (.mo, " +
                           std::to_string(kMoHeaderBytes) + " bytes)");
  }
  const uint32_t magic = ReadBigEndian32(bytes.data());
  if (magic != kMoMagic && magic != kMoMagicSwapped) {
    return InvalidArgument(path + ": magic number " + Hex32(magic) +
                           " is not a gettext catalog's (.mo: " + Hex32(kMoMagic) +
                           " in either byte order)");
  }
  return MoImage(path, std::move(bytes), magic == kMoMagic);
}

// Checks the revision and that both tables of N entries lie inside the file.
Status CheckTables(const MoImage& mo, uint64_t count, uint64_t originals, uint64_t translations) {
  const uint32_t revision = mo.Word(4);
  if ((revision >> 16) > kMaxMajorRevision) {
    return InvalidArgument(mo.path() + ": revision " + Hex32(revision) +
                           " of the .mo format is not supported (major revisions 0 and 1 are)");
  }
  const uint64_t table_bytes = count * kMoEntryBytes;  // < 2^35: no overflow
  for (const auto& [offset, what] : {std::make_pair(originals, "originals (msgid)"),
                                     std::make_pair(translations, "translations (msgstr)")}) {
    if (offset > mo.size() || table_bytes > mo.size() - offset) {
      return InvalidArgument(mo.path() + ": its table of " + what + ", " + std::to_string(count) +
                             " entries of 8 bytes at offset " + std::to_string(offset) +
                             ", runs past the end of the file (" + std::to_string(mo.size()) +
                             " bytes); the catalog is truncated or damaged");
    }
  }
  return Status::Ok();
}

// The part of a msgid that is the message: after its context, before its plural.
std::string MessageOf(const std::string& msgid) {
  const std::string singular = msgid.substr(0, msgid.find('\0'));
  const size_t context = singular.find(kContextSeparator);
  return context == std::string::npos ? singular : singular.substr(context + 1);
}

}  // namespace

StatusOr<std::vector<MoMessage>> ReadMoCatalog(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(MoImage mo, ReadImage(path));
  const uint32_t count = mo.Word(8);
  const uint64_t originals = mo.Word(12);
  const uint64_t translations = mo.Word(16);
  SPILL_RETURN_IF_ERROR(CheckTables(mo, count, originals, translations));
  std::vector<MoMessage> messages;
  for (uint32_t entry = 0; entry < count; ++entry) {
    SPILL_ASSIGN_OR_RETURN(std::string msgid, mo.String(originals, entry, "msgid"));
    SPILL_ASSIGN_OR_RETURN(std::string msgstr, mo.String(translations, entry, "msgstr"));
    MoMessage message;
    message.entry = entry;
    message.msgid = MessageOf(msgid);
    message.msgstr = msgstr.substr(0, msgstr.find('\0'));
    if (message.msgid.empty() || message.msgstr.empty()) continue;  // the header, untranslated
    messages.push_back(std::move(message));
  }
  return messages;
}

}  // namespace spill
