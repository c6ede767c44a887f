#include "common/oci/tar_reader.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace kmodd::image {
namespace {

constexpr size_t kBlock = 512;

struct Field {
  size_t offset, length;
};
constexpr Field kName{0, 100}, kMode{100, 8}, kSize{124, 12}, kChecksum{148, 8},
    kLinkname{157, 100}, kMagic{257, 6}, kPrefix{345, 155};
constexpr size_t kTypeflag = 156;

std::string_view Raw(const char* block, Field f) { return {block + f.offset, f.length}; }

// A NUL-terminated (or full-width) string field.
std::string Str(const char* block, Field f) {
  const std::string_view raw = Raw(block, f);
  return std::string(raw.substr(0, raw.find('\0')));
}

// Octal with optional leading and trailing spaces or NULs, or GNU base-256 (the high bit of
// the first byte set) for values that do not fit.
bool ParseNumber(std::string_view raw, uint64_t& out) {
  out = 0;
  if (!raw.empty() && (static_cast<unsigned char>(raw[0]) & 0x80) != 0) {
    if (static_cast<unsigned char>(raw[0]) != 0x80) {
      return false;  // negative, or a form nobody writes
    }
    for (size_t i = 1; i < raw.size(); ++i) {
      if (out >> 55 != 0) {
        return false;
      }
      out = (out << 8) | static_cast<unsigned char>(raw[i]);
    }
    return out <= (uint64_t{1} << 62);
  }
  size_t i = 0;
  while (i < raw.size() && (raw[i] == ' ' || raw[i] == '\0')) {
    ++i;
  }
  for (; i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++i) {
    if (out >> 60 != 0) {
      return false;
    }
    out = out * 8 + static_cast<uint64_t>(raw[i] - '0');
  }
  for (; i < raw.size(); ++i) {
    if (raw[i] != ' ' && raw[i] != '\0') {
      return false;
    }
  }
  return true;
}

bool ParseDecimal(std::string_view s, uint64_t& out) {
  out = 0;
  if (s.empty() || s.size() > 18) {
    return false;
  }
  for (char c : s) {
    if (c < '0' || c > '9') {
      return false;
    }
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

uint64_t PaddingFor(uint64_t size) { return (kBlock - size % kBlock) % kBlock; }

TarType TypeOf(char flag) {
  switch (flag) {
    case '0':
    case '\0':
    case '7':
      return TarType::kRegular;
    case '1':
      return TarType::kHardlink;
    case '2':
      return TarType::kSymlink;
    case '3':
      return TarType::kCharDevice;
    case '4':
      return TarType::kBlockDevice;
    case '5':
      return TarType::kDirectory;
    case '6':
      return TarType::kFifo;
    default:
      return TarType::kOther;
  }
}

// Types whose size field says nothing about data following the header (as in Go's
// archive/tar): a hardlink or a directory with a nonzero size still has no data.
bool HeaderOnly(TarType t) { return t != TarType::kRegular && t != TarType::kOther; }

}  // namespace

std::string DescribeTarType(char typeflag) {
  switch (TypeOf(typeflag)) {
    case TarType::kRegular:
      return "regular file";
    case TarType::kHardlink:
      return "hardlink";
    case TarType::kSymlink:
      return "symlink";
    case TarType::kCharDevice:
      return "character device";
    case TarType::kBlockDevice:
      return "block device";
    case TarType::kDirectory:
      return "directory";
    case TarType::kFifo:
      return "fifo";
    case TarType::kOther:
      break;
  }
  const unsigned char c = static_cast<unsigned char>(typeflag);
  return c >= 0x20 && c < 0x7f ? absl::StrCat("unknown entry type '", std::string(1, typeflag), "'")
                               : absl::StrCat("unknown entry type 0x", absl::Hex(c));
}

absl::Status TarReader::Feed(const char* data, size_t n) {
  while (n > 0 && error_.ok()) {
    error_ = Step(data, n);
  }
  return error_;
}

absl::Status TarReader::Finish() {
  if (!error_.ok()) {
    return error_;
  }
  // An archive may also end at an entry boundary without the marker, or right after the
  // last entry's data without its padding: umoci 0.4 writes layers that way, and Go's
  // archive/tar (containerd) reads them. The blob's digest, checked by the caller, is what
  // proves the stream complete; a cut inside a header or inside file data is still an error.
  const bool pending_meta = has_next_path_ || has_next_link_ || has_next_size_;
  const bool at_boundary = (state_ == State::kHeader && block_fill_ == 0) ||
                           (state_ == State::kPadding && last_was_data_);
  if (state_ != State::kEnd && (!at_boundary || pending_meta)) {
    error_ = absl::InvalidArgumentError(absl::StrCat("tar: stream truncated at byte ", offset_));
  }
  return error_;
}

absl::Status TarReader::Step(const char*& data, size_t& n) {
  auto take = [&](size_t k) {
    data += k;
    n -= k;
    offset_ += k;
  };
  switch (state_) {
    case State::kHeader: {
      const size_t k = std::min(n, kBlock - block_fill_);
      std::memcpy(block_ + block_fill_, data, k);
      block_fill_ += k;
      take(k);
      if (block_fill_ < kBlock) {
        return absl::OkStatus();
      }
      block_fill_ = 0;
      return OnHeader();
    }
    case State::kData: {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, remaining_));
      const char* piece = data;
      take(k);
      remaining_ -= k;
      if (absl::Status s = visitor_.OnData(piece, k); !s.ok()) {
        return s;
      }
      if (remaining_ == 0) {
        state_ = padding_ > 0 ? State::kPadding : State::kHeader;
        last_was_data_ = true;
        return visitor_.OnEntryEnd();
      }
      return absl::OkStatus();
    }
    case State::kMeta: {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, remaining_));
      meta_.append(data, k);
      take(k);
      remaining_ -= k;
      if (remaining_ == 0) {
        state_ = padding_ > 0 ? State::kPadding : State::kHeader;
        last_was_data_ = false;
        return OnMetaComplete();
      }
      return absl::OkStatus();
    }
    case State::kPadding: {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, padding_));
      take(k);
      padding_ -= k;
      if (padding_ == 0) {
        state_ = State::kHeader;
      }
      return absl::OkStatus();
    }
    case State::kEnd:
      take(n);  // whatever follows the marker (record padding) is not part of the archive
      return absl::OkStatus();
  }
  return absl::InternalError("tar: bad state");
}

absl::Status TarReader::OnHeader() {
  const uint64_t header_at = offset_ - kBlock;
  if (std::all_of(block_, block_ + kBlock, [](char c) { return c == 0; })) {
    if (has_next_path_ || has_next_link_ || has_next_size_) {
      return absl::InvalidArgumentError(absl::StrCat("tar: archive ends at byte ", header_at,
                                                     " between an extended header and its entry"));
    }
    state_ = State::kEnd;
    return absl::OkStatus();
  }
  uint64_t stored = 0;
  if (!ParseNumber(Raw(block_, kChecksum), stored)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar: unreadable header checksum at byte ", header_at));
  }
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksum.offset && i < kChecksum.offset + kChecksum.length;
    const char c = in_field ? ' ' : block_[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  if (stored != unsigned_sum && static_cast<int64_t>(stored) != signed_sum) {
    return absl::InvalidArgumentError(absl::StrCat("tar: header checksum mismatch at byte ",
                                                   header_at, " (stored ", stored, ", computed ",
                                                   unsigned_sum, ")"));
  }
  uint64_t size = 0;
  uint64_t mode = 0;
  if (!ParseNumber(Raw(block_, kSize), size) || !ParseNumber(Raw(block_, kMode), mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar: unreadable size or mode at byte ", header_at));
  }
  const char flag = block_[kTypeflag];
  if (flag == 'L' || flag == 'K' || flag == 'x' || flag == 'g') {
    if (size > max_meta_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat("tar: extended header of ", size,
                                                     " bytes at byte ", header_at, " exceeds ",
                                                     max_meta_bytes_));
    }
    meta_type_ = flag;
    meta_.clear();
    remaining_ = size;
    padding_ = PaddingFor(size);
    state_ = State::kMeta;
    if (size == 0) {
      state_ = padding_ > 0 ? State::kPadding : State::kHeader;
      return OnMetaComplete();
    }
    return absl::OkStatus();
  }

  TarEntry e;
  e.typeflag = flag;
  e.type = TypeOf(flag);
  e.mode = static_cast<uint32_t>(mode & 07777);
  const bool posix_ustar = Raw(block_, kMagic) == std::string_view("ustar\0", 6);
  if (has_next_path_) {
    e.path = std::move(next_path_);
  } else {
    e.path = Str(block_, kName);
    const std::string prefix = posix_ustar ? Str(block_, kPrefix) : "";
    if (!prefix.empty()) {
      e.path = absl::StrCat(prefix, "/", e.path);
    }
  }
  e.link = has_next_link_ ? std::move(next_link_) : Str(block_, kLinkname);
  e.size = has_next_size_ ? next_size_ : size;
  has_next_path_ = has_next_link_ = has_next_size_ = false;
  next_path_.clear();
  next_link_.clear();
  if (HeaderOnly(e.type)) {
    e.size = 0;
  }
  if (e.path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar: entry with an empty name at byte ", header_at));
  }
  current_ = std::move(e);
  if (absl::Status s = visitor_.OnEntry(current_); !s.ok()) {
    return s;
  }
  remaining_ = current_.size;
  padding_ = PaddingFor(current_.size);
  if (current_.size == 0) {
    state_ = State::kHeader;
    return visitor_.OnEntryEnd();
  }
  state_ = State::kData;
  return absl::OkStatus();
}

absl::Status TarReader::OnMetaComplete() {
  switch (meta_type_) {
    case 'L':
    case 'K': {
      std::string value = meta_.substr(0, meta_.find('\0'));
      if (value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tar: empty GNU long ", meta_type_ == 'L' ? "name" : "link", " before byte ", offset_));
      }
      (meta_type_ == 'L' ? next_path_ : next_link_) = std::move(value);
      (meta_type_ == 'L' ? has_next_path_ : has_next_link_) = true;
      return absl::OkStatus();
    }
    case 'x':
      return ApplyPax(meta_);
    default:
      return absl::OkStatus();  // 'g': global headers carry nothing kmodd uses
  }
}

absl::Status TarReader::ApplyPax(const std::string& records) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar: malformed PAX header before byte ", offset_, ": ", std::string(why)));
  };
  std::string_view rest(records);
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    uint64_t len = 0;
    if (space == std::string_view::npos || !ParseDecimal(rest.substr(0, space), len) ||
        len <= space + 1 || len > rest.size() || rest[len - 1] != '\n') {
      return bad("bad record length");
    }
    const std::string_view kv = rest.substr(space + 1, len - space - 2);
    rest.remove_prefix(len);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return bad("record without key=value");
    }
    const std::string_view key = kv.substr(0, eq);
    const std::string_view value = kv.substr(eq + 1);
    if ((key == "path" || key == "linkpath") && value.find('\0') != std::string_view::npos) {
      return bad("NUL in a path");
    }
    // An empty value removes the override: the header's own field applies again.
    if (key == "path") {
      next_path_ = std::string(value);
      has_next_path_ = !value.empty();
    } else if (key == "linkpath") {
      next_link_ = std::string(value);
      has_next_link_ = !value.empty();
    } else if (key == "size") {
      has_next_size_ = !value.empty();
      if (has_next_size_ &&
          (!ParseDecimal(value, next_size_) || next_size_ > (uint64_t{1} << 62))) {
        return bad("bad size");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kmodd::image
