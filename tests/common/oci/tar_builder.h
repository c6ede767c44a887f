#pragma once

// Builds tar streams (ustar, GNU long names, PAX) and compresses them with zlib and zstd, so
// that layer tests are plain C++ with no tar or python at test time.

#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace kmodd::image::testing {

struct HeaderFields {
  std::string name;
  char typeflag = '0';
  unsigned mode = 0644;
  unsigned long long size = 0;
  std::string linkname;
  std::string prefix;  // ustar prefix field
  bool gnu_magic = false;
};

// Designated initializers would be shorter, but GCC's -Wmissing-field-initializers flags them.
inline HeaderFields Fields(std::string name, char typeflag = '0', unsigned long long size = 0,
                           unsigned mode = 0644, std::string linkname = "") {
  HeaderFields f;
  f.name = std::move(name);
  f.typeflag = typeflag;
  f.size = size;
  f.mode = mode;
  f.linkname = std::move(linkname);
  return f;
}

// Zero-padded octal filling width-1 bytes, then NUL (values must fit).
inline void PutOctal(char* field, size_t width, unsigned long long v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1), v);
  std::memcpy(field, buf, width - 1);
  field[width - 1] = '\0';
}

// One 512-byte header with a correct checksum (corrupt it afterwards to test the check).
inline std::string Header(const HeaderFields& f) {
  std::string h(512, '\0');
  std::memcpy(&h[0], f.name.data(), std::min<size_t>(f.name.size(), 100));
  PutOctal(&h[100], 8, f.mode);
  PutOctal(&h[108], 8, 0);
  PutOctal(&h[116], 8, 0);
  PutOctal(&h[124], 12, f.size);
  PutOctal(&h[136], 12, 0);
  h[156] = f.typeflag;
  std::memcpy(&h[157], f.linkname.data(), std::min<size_t>(f.linkname.size(), 100));
  if (f.gnu_magic) {
    std::memcpy(&h[257], "ustar  ", 8);
  } else {
    std::memcpy(&h[257], "ustar", 6);
    std::memcpy(&h[263], "00", 2);
  }
  std::memcpy(&h[345], f.prefix.data(), std::min<size_t>(f.prefix.size(), 155));
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) {
    sum += c;
  }
  PutOctal(&h[148], 7, sum);
  h[155] = ' ';
  return h;
}

inline std::string Padded(const std::string& data) {
  return data + std::string((512 - data.size() % 512) % 512, '\0');
}

class TarBuilder {
 public:
  TarBuilder& File(const std::string& path, const std::string& content, unsigned mode = 0644) {
    return Entry(Fields(path, '0', content.size(), mode), content);
  }
  TarBuilder& Dir(const std::string& path, unsigned mode = 0755) {
    return Entry(Fields(path, '5', 0, mode));
  }
  TarBuilder& Symlink(const std::string& path, const std::string& target) {
    return Entry(Fields(path, '2', 0, 0777, target));
  }
  TarBuilder& Hardlink(const std::string& path, const std::string& target) {
    return Entry(Fields(path, '1', 0, 0644, target));
  }
  TarBuilder& Special(const std::string& path, char typeflag, unsigned mode = 0644) {
    return Entry(Fields(path, typeflag, 0, mode));
  }
  TarBuilder& Whiteout(const std::string& dir, const std::string& name) {
    return File(dir.empty() ? ".wh." + name : dir + "/.wh." + name, "");
  }
  TarBuilder& Opaque(const std::string& dir) { return File(dir + "/.wh..wh..opq", ""); }
  // A file whose path is given by a PAX extended header (the ustar name is a stand-in).
  TarBuilder& PaxFile(const std::string& path, const std::string& content) {
    Pax("path", path);
    return File("PaxHeaders/stand-in", content);
  }
  TarBuilder& Pax(const std::string& key, const std::string& value, char type = 'x') {
    std::string record = " " + key + "=" + value + "\n";
    size_t len = record.size() + 1;
    while (std::to_string(len).size() + record.size() != len) {
      ++len;
    }
    const std::string data = std::to_string(len) + record;
    return Entry(Fields("PaxHeaders/x", type, data.size()), data);
  }
  // A GNU long name ('L') or long link ('K') record for the next entry.
  TarBuilder& GnuLong(char type, const std::string& value) {
    const std::string data = value + '\0';
    HeaderFields f = Fields("././@LongLink", type, data.size());
    f.gnu_magic = true;
    return Entry(f, data);
  }
  TarBuilder& Entry(const HeaderFields& f, const std::string& data = "") {
    out_ += Header(f);
    out_ += Padded(data);
    return *this;
  }
  TarBuilder& Raw(const std::string& bytes) {
    out_ += bytes;
    return *this;
  }
  // The archive with its end-of-archive marker.
  std::string Finish() const { return out_ + std::string(1024, '\0'); }
  // Without the marker, as a truncated stream would end.
  const std::string& Unfinished() const { return out_; }

 private:
  std::string out_;
};

// Streaming gzip, for inputs too large to build in memory (decompression bombs).
class GzipWriter {
 public:
  GzipWriter() {
    if (deflateInit2(&z_, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw std::runtime_error("deflateInit2");
    }
  }
  ~GzipWriter() { deflateEnd(&z_); }
  void Write(const std::string& data) { Run(data, Z_NO_FLUSH); }
  std::string Finish() {
    Run("", Z_FINISH);
    return std::move(out_);
  }

 private:
  void Run(const std::string& data, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    char buf[65536];
    int rc = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buf);
      z_.avail_out = sizeof buf;
      rc = deflate(&z_, flush);
      out_.append(buf, sizeof buf - z_.avail_out);
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
  }
  z_stream z_{};
  std::string out_;
};

inline std::string Gzip(const std::string& data) {
  GzipWriter w;
  w.Write(data);
  return w.Finish();
}

inline std::string Zstd(const std::string& data, int level = 3) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) {
    throw std::runtime_error("ZSTD_compress");
  }
  out.resize(n);
  return out;
}

}  // namespace kmodd::image::testing
