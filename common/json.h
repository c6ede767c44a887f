#pragma once

// The one JSON parser for untrusted input (Kubernetes objects, admission reviews, registry
// manifests and tokens, pull secrets), on common/value.h's Value.
//
// A parser of our own rather than yaml-cpp or protobuf's JSON->Struct: yaml-cpp reads JSON
// as YAML (quoted "123" and 123 both come back as scalars, surrogate-pair escapes and
// non-YAML escapes differ, and it throws), and protobuf's Struct turns every number into a
// double and forgets key order. Kubernetes objects carry int64 counters (generation,
// observedGeneration, Event count) that must come back exact, and are easier to read when
// their keys keep the server's order. Boost.JSON arrived in Boost 1.75; Debian 12 has 1.74.
//
// Value has no floating point type, and Kubernetes API conventions forbid floats in API
// types: a number with a fraction or an exponent is an error here, reported with its offset,
// never silently rounded or turned into a string.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/value.h"

namespace kmodd {

// Bounds on one document, beside the caller's bound on its bytes. The defaults admit any
// object the API server can store (etcd refuses requests over 1.5 MiB by default, so no stored
// object has more than ~220,000 keys in one map) and a page of a List with thousands of
// values per item, with room to spare; they bound what a hostile text can make us build.
struct JsonLimits {
  int max_depth = 200;                  // Kubernetes objects nest a few dozen levels at most
  size_t max_keys_per_object = 1 << 20;  // 1,048,576: a Node with 100,000 labels is fine
  size_t max_values = 1 << 24;          // 16,777,216 values (about 1 GiB as Values), any depth
};

// One JSON text (RFC 8259) into a Value. Objects keep their key order; a repeated key keeps
// its last value, as Go's encoding/json (the API server's) does; finding it costs the same
// for one key or a million. Strings must be UTF-8. InvalidArgument, with the byte offset,
// for anything else, and for a document over `limits`.
[[nodiscard]] absl::StatusOr<Value> ParseJson(std::string_view text, const JsonLimits& limits);
[[nodiscard]] absl::StatusOr<Value> ParseJson(std::string_view text);

// Splits a byte stream into top-level JSON objects or arrays, wherever the network cut it:
// a watch response is a sequence of event objects, newline-separated by convention but not
// by contract. Only framing is checked here; each value is parsed by ParseJson.
class JsonFramer {
 public:
  using Sink = std::function<absl::Status(std::string_view value)>;

  explicit JsonFramer(size_t max_value_bytes = 64 << 20) : max_(max_value_bytes) {}

  // Consumes `n` bytes and calls `sink` with each value completed by them. The sink's
  // error stops the feed and is returned. InvalidArgument for bytes that cannot start a
  // value; ResourceExhausted for a value over the limit.
  [[nodiscard]] absl::Status Feed(const char* data, size_t n, const Sink& sink);

  // True when no partial value is buffered: the stream ended cleanly between values.
  bool AtBoundary() const { return buffer_.empty(); }

 private:
  const size_t max_;
  std::string buffer_;  // the value in progress, from its first byte
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// What a value is, for messages: "an object", "a list", "a string", "a number", "a boolean",
// "null".
const char* JsonTypeName(const Value& v);

// Lookups through nested maps: {"metadata", "name"}. Absent or of another type: "" or 0.
const Value* Lookup(const Value& v, std::initializer_list<std::string_view> path);
std::string StringAt(const Value& v, std::initializer_list<std::string_view> path);
int64_t IntAt(const Value& v, std::initializer_list<std::string_view> path);

// A copy of map `v` with `key` set to `value` (replaced in place when present, else appended).
// A non-map `v` becomes a map.
Value With(const Value& v, std::string_view key, Value value);

}  // namespace kmodd
