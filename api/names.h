#pragma once

// Kubernetes names, host paths and image references: the small predicates that validation
// is built from. Each "...Problem" function returns "" when the input is fine and otherwise
// a sentence saying what is wrong and what would be valid.

#include <string>
#include <string_view>
#include <vector>

namespace kmodd::api {

extern const char kDnsSubdomainRule[];
extern const char kDnsLabelRule[];
extern const char kLabelNameRule[];

std::string Quote(std::string_view s);
std::vector<std::string_view> Split(std::string_view s, char sep);

// Kubernetes' own patterns (k8s.io/apimachinery/pkg/util/validation).
bool IsLabelName(std::string_view s);
bool IsDnsSubdomain(std::string_view s);
bool IsDnsLabel(std::string_view s);
std::string QualifiedNameProblem(std::string_view key);

// Go's path.Clean, the form KMM compares host paths in.
std::string CleanPath(std::string_view path);
bool HasDotDot(std::string_view path);
bool IsUnder(std::string_view path, std::string_view dir);

// Whether an image reference pins a tag or a digest.
std::string ImageProblem(std::string_view image);

}  // namespace kmodd::api
