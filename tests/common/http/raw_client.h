#pragma once
// A blocking HTTP client on a raw socket, over TLS or plain TCP, for the tests of
// common/http's server and of what runs on it: it connects from any loopback address
// (127.0.0.0/8), so one test plays several clients; it can stall in the middle of a request
// or send a whole body before reading the answer; and each read or write gives up after its
// timeout (SO_RCVTIMEO, SO_SNDTIMEO), so a test fails rather than hangs. The server's
// certificate is not checked: these tests are about what a client can make the server do.
// Header-only (the unit binary compiles *_test.cc only).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kmodd::testing {

struct TestResponse {
  int status = 0;
  std::string head;  // the status line and the headers, lower-cased
  std::string body;
};

// A request as the API server sends it: POST with a Content-Length.
inline std::string PostRequest(const std::string& body,
                               const std::string& target = "/validate-module?timeout=10s") {
  return absl::StrCat("POST ", target, " HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                      "Content-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body);
}

enum class Wire { kTls, kPlain };

class RawClient {
 public:
  // A TCP socket bound to `source`, not connected yet: a test that exhausts file
  // descriptors makes its clients first, since connect() needs no new one.
  explicit RawClient(const std::string& source = "127.0.0.1",
                     std::chrono::milliseconds timeout = std::chrono::seconds(10),
                     Wire wire = Wire::kTls)
      : wire_(wire) {
    static const bool kNoSigpipe = [] {
      std::signal(SIGPIPE, SIG_IGN);  // OpenSSL writes with write(2)
      return true;
    }();
    (void)kNoSigpipe;
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      return;
    }
    SetTimeout(timeout);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &a.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      Close();
    }
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool Connect(uint16_t port) {
    if (fd_ < 0) {
      return false;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }

  bool Handshake() {
    if (fd_ < 0) {
      return false;
    }
    ctx_ = SSL_CTX_new(TLS_client_method());
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    return SSL_connect(ssl_) == 1;
  }

  bool Open(uint16_t port) { return Connect(port) && (wire_ == Wire::kPlain || Handshake()); }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const size_t chunk = std::min<size_t>(bytes.size(), 1 << 20);
      const int n = ssl_ != nullptr
                        ? SSL_write(ssl_, bytes.data(), static_cast<int>(chunk))
                        : static_cast<int>(::send(fd_, bytes.data(), chunk, MSG_NOSIGNAL));
      if (n <= 0) {
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response (Content-Length framed, as the server writes them); nullopt when the
  // connection ends or a read times out first.
  std::optional<TestResponse> Receive() {
    size_t end;
    while ((end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore()) {
        return std::nullopt;
      }
    }
    TestResponse r;
    size_t length = 0;
    const std::string head = in_.substr(0, end);
    r.head = absl::AsciiStrToLower(head);
    const std::vector<std::string> lines = absl::StrSplit(head, "\r\n");
    const std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() < 2 || !absl::SimpleAtoi(first[1], &r.status)) {
      return std::nullopt;
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon != std::string::npos &&
          absl::AsciiStrToLower(lines[i].substr(0, colon)) == "content-length" &&
          !absl::SimpleAtoi(lines[i].substr(colon + 1), &length)) {
        return std::nullopt;
      }
    }
    while (in_.size() < end + 4 + length) {
      if (!ReadMore()) {
        return std::nullopt;
      }
    }
    r.body = in_.substr(end + 4, length);
    in_.erase(0, end + 4 + length);
    return r;
  }

  std::optional<TestResponse> Post(const std::string& body) {
    if (!Send(PostRequest(body))) {
      return std::nullopt;
    }
    return Receive();
  }

  // The certificate the server presented, in PEM; "" before a handshake.
  std::string PeerCertificatePem() const {
    if (ssl_ == nullptr) {
      return "";
    }
    X509* cert = SSL_get1_peer_certificate(ssl_);
    if (cert == nullptr) {
      return "";
    }
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string pem(data, static_cast<size_t>(n));
    BIO_free(bio);
    X509_free(cert);
    return pem;
  }

  // True when the server ends the connection (close_notify, EOF or reset) within `wait`;
  // bytes it sends meanwhile are dropped.
  bool ClosedWithin(std::chrono::milliseconds wait) {
    SetTimeout(wait);
    const auto until = std::chrono::steady_clock::now() + wait;
    bool closed = false;
    char buf[4096];
    while (!closed && std::chrono::steady_clock::now() < until) {
      const int n = ssl_ != nullptr ? SSL_read(ssl_, buf, sizeof buf)
                                    : static_cast<int>(::recv(fd_, buf, sizeof buf, 0));
      if (n > 0) {
        continue;
      }
      if (ssl_ == nullptr) {
        closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        break;
      }
      const int err = SSL_get_error(ssl_, n);
      closed = err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE;
      break;
    }
    SetTimeout(std::chrono::seconds(10));
    return closed;
  }

 private:
  bool ReadMore() {
    char buf[16384];
    const int n = ssl_ != nullptr ? SSL_read(ssl_, buf, sizeof buf)
                                  : static_cast<int>(::recv(fd_, buf, sizeof buf, 0));
    if (n <= 0) {
      return false;
    }
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  void SetTimeout(std::chrono::milliseconds t) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(t.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  void Close() {
    if (ssl_ != nullptr) {
      SSL_free(ssl_);
      ssl_ = nullptr;
    }
    if (ctx_ != nullptr) {
      SSL_CTX_free(ctx_);
      ctx_ = nullptr;
    }
    if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }

  Wire wire_;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string in_;
};

}  // namespace kmodd::testing
