#include "api/diagnostic.h"

#include "absl/strings/str_cat.h"

namespace kmodd::api {

std::string Diagnostic::ToString() const {
  std::string out = source;
  if (line > 0) {
    absl::StrAppend(&out, ":", line);
  }
  if (!object.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : ": ", object);
  }
  if (!path.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : ": ", path);
  }
  absl::StrAppend(&out, out.empty() ? "" : ": ", message);
  return out;
}

}  // namespace kmodd::api
