#include "controller/kube/rest_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/http/beast_client.h"
#include "common/json.h"
#include "controller/kube/errors.h"

namespace kmodd::kube {
namespace {

constexpr char kJson[] = "application/json";

std::string What(std::string_view method, std::string_view target) {
  // Without the query: selectors are noise in messages.
  return absl::StrCat(std::string(method), " ", std::string(target.substr(0, target.find('?'))));
}

// "?a=b&c=d" from the non-empty pairs.
std::string Query(std::initializer_list<std::pair<const char*, std::string>> params) {
  std::string q;
  for (const auto& [key, value] : params) {
    if (!value.empty()) {
      absl::StrAppend(&q, q.empty() ? "?" : "&", key, "=", QueryEscape(value));
    }
  }
  return q;
}

absl::Status ParseEvent(std::string_view what, std::string_view text, WatchEvent& event,
                        bool& is_error) {
  absl::StatusOr<Value> parsed = ParseJson(text);
  if (!parsed.ok()) {
    return absl::UnavailableError(
        absl::StrCat(std::string(what), ": bad watch event: ", parsed.status().message()));
  }
  const std::string type = StringAt(*parsed, {"type"});
  const Value* object = parsed->Find("object");
  if (object == nullptr || !object->IsMap()) {
    return absl::UnavailableError(
        absl::StrCat(std::string(what), ": watch event without an object"));
  }
  is_error = false;
  if (type == "ADDED") {
    event.type = EventType::kAdded;
  } else if (type == "MODIFIED") {
    event.type = EventType::kModified;
  } else if (type == "DELETED") {
    event.type = EventType::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = EventType::kBookmark;
  } else if (type == "ERROR") {
    is_error = true;
  } else {
    return absl::UnavailableError(
        absl::StrCat(std::string(what), ": unknown watch event type \"", type, "\""));
  }
  event.object = *object;
  return absl::OkStatus();
}

}  // namespace

std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<RestKubeClient>> RestKubeClient::Create(const KubeConfig& config,
                                                                       const Clock& clock) {
  http::ClientOptions options;
  options.tls.use_system_cas = config.ca_pem.empty();
  options.tls.ca_pem = config.ca_pem;
  options.tls.insecure_skip_verify = config.insecure_skip_tls_verify;
  options.tls.client_cert_pem = config.client_cert_pem;
  options.tls.client_key_pem = config.client_key_pem;
  options.user_agent = "kmodd-controller";
  // Status writes, label patches, Events and TokenReviews are many small calls to one
  // server: a TLS handshake each cost more than the call itself (docs/performance.md).
  options.reuse_connections = true;
  absl::StatusOr<std::unique_ptr<http::BeastHttpClient>> http =
      http::BeastHttpClient::Create(std::move(options));
  if (!http.ok()) {
    return http.status();
  }
  return std::make_unique<RestKubeClient>(config, *std::move(http), clock);
}

RestKubeClient::RestKubeClient(const KubeConfig& config, std::unique_ptr<http::HttpClient> http,
                               const Clock& clock)
    : server_(config.server), http_(std::move(http)), token_(config.token, config.token_file, clock) {
  while (!server_.empty() && server_.back() == '/') {
    server_.pop_back();
  }
}

absl::StatusOr<http::Request> RestKubeClient::NewRequest(std::string_view method,
                                                         std::string_view target) {
  http::Request request;
  request.method = std::string(method);
  request.url = absl::StrCat(server_, std::string(target));
  request.headers.Set("Accept", kJson);
  request.follow_redirects = false;
  request.timeout = kRequestTimeout;
  absl::StatusOr<std::string> token = token_.Token();
  if (!token.ok()) {
    return token.status();
  }
  if (!token->empty()) {
    request.headers.Set("Authorization", absl::StrCat("Bearer ", *token));
  }
  return request;
}

absl::StatusOr<Value> RestKubeClient::Call(std::string_view method, std::string_view target,
                                           std::string_view content_type, std::string body) {
  absl::StatusOr<http::Request> request = NewRequest(method, target);
  if (!request.ok()) {
    return request.status();
  }
  if (!content_type.empty()) {
    request->headers.Set("Content-Type", std::string(content_type));
  }
  request->body = std::move(body);
  absl::StatusOr<http::Response> response = http_->Fetch(*request);
  if (!response.ok()) {
    return response.status();
  }
  if (response->status == 401) {
    token_.Invalidate();  // a rotated token: read the file again next time
  }
  if (response->status < 200 || response->status >= 300) {
    return KubeError(What(method, target), response->status, response->body);
  }
  absl::StatusOr<Value> parsed = ParseJson(response->body);
  if (!parsed.ok()) {
    return absl::UnavailableError(absl::StrCat(What(method, target),
                                               ": bad response: ", parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<Value> RestKubeClient::Get(std::string_view path) {
  return Call("GET", path, "", "");
}

absl::StatusOr<ObjectList> RestKubeClient::List(std::string_view path,
                                                const ListOptions& options) {
  const std::string target = absl::StrCat(
      std::string(path),
      Query({{"labelSelector", options.label_selector},
             {"fieldSelector", options.field_selector},
             {"limit", options.limit > 0 ? absl::StrCat(options.limit) : std::string()},
             {"continue", options.continue_token}}));
  absl::StatusOr<Value> list = Call("GET", target, "", "");
  if (!list.ok()) {
    return list.status();
  }
  ObjectList out;
  out.resource_version = StringAt(*list, {"metadata", "resourceVersion"});
  out.continue_token = StringAt(*list, {"metadata", "continue"});
  if (const Value* items = list->Find("items"); items != nullptr && items->IsList()) {
    out.items = items->AsList();
  } else if (items != nullptr && !items->IsNull()) {
    return absl::UnavailableError(absl::StrCat(What("GET", path), ": items is not a list"));
  }
  return out;
}

absl::Status RestKubeClient::Watch(std::string_view path, const WatchOptions& options,
                                   const WatchHandler& handler) {
  const std::string target = absl::StrCat(
      std::string(path),
      Query({{"watch", "1"},
             {"allowWatchBookmarks", "true"},
             {"resourceVersion", options.resource_version},
             {"timeoutSeconds", absl::StrCat(options.timeout.count())},
             {"labelSelector", options.label_selector},
             {"fieldSelector", options.field_selector}}));
  const std::string what = What("WATCH", path);
  absl::StatusOr<http::Request> request = NewRequest("GET", target);
  if (!request.ok()) {
    return request.status();
  }
  // The server ends the stream at the timeout; it may be silent until then.
  const http::Duration bound =
      std::chrono::duration_cast<http::Duration>(options.timeout) + kRequestTimeout;
  request->timeout = bound;
  request->idle_timeout = bound;
  request->cancel = options.cancel;

  JsonFramer framer;
  absl::Status event_error;  // an ERROR event: ends the stream, reported as the result
  http::BodyHandler body;
  body.on_data = [&](const char* data, size_t n) {
    return framer.Feed(data, n, [&](std::string_view text) {
      WatchEvent event;
      bool is_error = false;
      if (absl::Status st = ParseEvent(what, text, event, is_error); !st.ok()) {
        return st;
      }
      if (is_error) {
        event_error = WatchErrorStatus(what, event.object);
        return event_error;
      }
      return handler(event);
    });
  };
  absl::StatusOr<http::Response> response = http_->Stream(*request, body);
  if (!event_error.ok()) {
    return event_error;
  }
  if (!response.ok()) {
    return response.status();
  }
  if (response->status == 401) {
    token_.Invalidate();
  }
  if (response->status < 200 || response->status >= 300) {
    return KubeError(what, response->status, response->body);
  }
  if (!framer.AtBoundary()) {
    return absl::UnavailableError(absl::StrCat(what, ": stream ended inside an event"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> RestKubeClient::Create(std::string_view collection, const Value& object) {
  return Call("POST", collection, kJson, ToJsonLine(object));
}

absl::StatusOr<Value> RestKubeClient::Update(std::string_view path, const Value& object) {
  return Call("PUT", path, kJson, ToJsonLine(object));
}

absl::StatusOr<Value> RestKubeClient::MergePatch(std::string_view path, const Value& patch) {
  return Call("PATCH", path, "application/merge-patch+json", ToJsonLine(patch));
}

absl::StatusOr<Value> RestKubeClient::Apply(std::string_view path, const Value& object,
                                            const ApplyOptions& options) {
  if (options.field_manager.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(What("APPLY", path), ": server-side apply needs a field manager"));
  }
  // JSON is YAML: the apply body goes as JSON with the YAML content type.
  const std::string target =
      absl::StrCat(std::string(path), Query({{"fieldManager", options.field_manager},
                                             {"force", options.force ? "true" : ""}}));
  return Call("PATCH", target, "application/apply-patch+yaml", ToJsonLine(object));
}

absl::Status RestKubeClient::Delete(std::string_view path) {
  return Call("DELETE", path, "", "").status();
}

}  // namespace kmodd::kube
