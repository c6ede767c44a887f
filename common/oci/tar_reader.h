#pragma once

// A push parser for tar streams: bytes go in as they come out of the decompressor, entries
// and their data come out through a visitor. Nothing is buffered but one 512-byte header and
// the (bounded) data of PAX and GNU long-name records.
//
// Reads ustar, GNU (long names and links, types L and K; base-256 sizes) and PAX (per-entry
// `path`, `linkpath` and `size`; global headers are read and ignored, as containerd does).
// Every header's checksum is verified. The archive ends with the end-of-archive marker (a
// zero block) or, as umoci 0.4 writes them and Go's archive/tar accepts, cleanly after the
// last entry (its padding may be missing too); a stream cut inside a header, an extended
// header or file data is truncated. The blob's digest proves the bytes are the published ones.
//
// The reader judges only the format. What an entry may be or where it may go is the
// caller's policy (see layer_writer.h): devices, fifos and unknown types come out as entries.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kmodd::image {

enum class TarType {
  kRegular,      // '0', '\0', '7' (contiguous)
  kHardlink,     // '1'
  kSymlink,      // '2'
  kCharDevice,   // '3'
  kBlockDevice,  // '4'
  kDirectory,    // '5'
  kFifo,         // '6'
  kOther,        // anything else (GNU sparse 'S', volume headers, ...): see TarEntry::typeflag
};

std::string DescribeTarType(char typeflag);

struct TarEntry {
  std::string path;  // as in the archive, after GNU/PAX overrides; never empty, no NUL
  std::string link;  // symlink target or hardlink target (an archive path)
  TarType type = TarType::kRegular;
  char typeflag = '0';
  uint32_t mode = 0;  // permission and setuid/setgid/sticky bits (07777)
  uint64_t size = 0;  // data bytes that follow; 0 for header-only types
};

class TarVisitor {
 public:
  virtual ~TarVisitor() = default;
  // A new entry. Its data, if any, follows through OnData, then OnEntryEnd.
  [[nodiscard]] virtual absl::Status OnEntry(const TarEntry& entry) = 0;
  [[nodiscard]] virtual absl::Status OnData(const char* data, size_t n) = 0;
  [[nodiscard]] virtual absl::Status OnEntryEnd() = 0;
};

class TarReader {
 public:
  // PAX and GNU long-name records are held in memory: refuse larger ones.
  static constexpr size_t kDefaultMaxMetaBytes = size_t{1} << 20;

  explicit TarReader(TarVisitor& visitor, size_t max_meta_bytes = kDefaultMaxMetaBytes)
      : visitor_(visitor), max_meta_bytes_(max_meta_bytes) {}

  // Parses `n` more bytes. The first error (the reader's or the visitor's) is sticky.
  [[nodiscard]] absl::Status Feed(const char* data, size_t n);
  // The stream has ended: an error unless it ended at the marker or an entry boundary.
  [[nodiscard]] absl::Status Finish();

  // The path of the entry being read or last read, for error messages ("" before the first).
  const std::string& current_path() const { return current_.path; }
  // Whether the stream is inside that entry's data (else between entries).
  bool in_entry_data() const { return state_ == State::kData; }

 private:
  enum class State { kHeader, kData, kMeta, kPadding, kEnd };

  absl::Status Step(const char*& data, size_t& n);
  absl::Status OnHeader();
  absl::Status OnMetaComplete();
  absl::Status ApplyPax(const std::string& records);

  TarVisitor& visitor_;
  const size_t max_meta_bytes_;

  State state_ = State::kHeader;
  char block_[512];
  size_t block_fill_ = 0;
  uint64_t remaining_ = 0;  // data bytes left in the current entry or record
  uint64_t padding_ = 0;    // bytes to skip after it
  uint64_t offset_ = 0;     // stream offset, for error messages
  bool last_was_data_ = false;  // the padding being skipped follows file data

  // A PAX or GNU record being accumulated, and what it will override in the next entry.
  char meta_type_ = 0;
  std::string meta_;
  std::string next_path_, next_link_;
  bool has_next_path_ = false, has_next_link_ = false;
  bool has_next_size_ = false;
  uint64_t next_size_ = 0;

  TarEntry current_;
  absl::Status error_;
};

}  // namespace kmodd::image
