#pragma once

// The TLS side of common/http's server: a server context with one certificate (TLS 1.2 or
// later), opaque outside common/http. The server asks its owner for the context in force
// at each connection it accepts, so an owner that swaps it rotates the certificate without
// a restart; open connections keep the one they were accepted with.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kmodd::http {

struct TlsServerContext;  // defined in server_session.h

// InvalidArgument for a pair that does not load or does not match.
[[nodiscard]] absl::StatusOr<std::shared_ptr<TlsServerContext>> MakeTlsServerContext(
    const std::string& cert_pem, const std::string& key_pem);

// Called on the server's I/O thread once per accepted connection; must be cheap and
// thread-safe. An empty function serves plain HTTP.
using TlsContextSource = std::function<std::shared_ptr<TlsServerContext>()>;

}  // namespace kmodd::http
