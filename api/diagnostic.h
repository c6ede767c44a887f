#pragma once

#include <string>
#include <vector>

namespace kmodd::api {

// A problem with one field of one object, located for a person to fix it.
struct Diagnostic {
  std::string source;  // file name, or "<stdin>"
  int line = 0;        // 1-based; 0 when unknown
  std::string object;  // "Module ns/name", empty when the document has no identity yet
  std::string path;    // field path, e.g. spec.moduleLoader.container.kernelMappings[2].regexp
  std::string message;

  // "file:line: Module ns/name: path: message"
  std::string ToString() const;
};

// A validation finding, before it is located in a file.
struct FieldError {
  std::string path;
  std::string message;
  bool operator==(const FieldError&) const = default;
};

}  // namespace kmodd::api
