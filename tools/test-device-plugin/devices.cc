#include "tools/test-device-plugin/devices.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kmodd::test_device_plugin {
namespace {

// "<name>-<n>" sorts after "<name>-<m>" when n > m, whatever the number of digits.
int DeviceNumber(absl::string_view id) {
  size_t dash = id.rfind('-');
  int n = 0;
  for (char c : id.substr(dash + 1)) {
    n = n * 10 + (c - '0');
  }
  return n;
}

bool ByNumber(const std::string& a, const std::string& b) {
  return DeviceNumber(a) < DeviceNumber(b);
}

}  // namespace

std::vector<std::string> DeviceIds(absl::string_view name, int count) {
  std::vector<std::string> ids;
  ids.reserve(count > 0 ? static_cast<size_t>(count) : 0);
  for (int i = 0; i < count; ++i) {
    ids.push_back(absl::StrCat(name, "-", i));
  }
  return ids;
}

Health AllDevices(const std::vector<std::string>& ids, bool healthy) {
  Health h;
  for (const std::string& id : ids) {
    h[id] = healthy;
  }
  return h;
}

absl::StatusOr<Health> ParseHealthFile(absl::string_view content,
                                       const std::vector<std::string>& ids) {
  if (content.size() > kMaxHealthFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the health file has ", content.size(),
                                                   " bytes; at most ", kMaxHealthFileBytes));
  }
  Health h = AllDevices(ids, true);
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    for (char c : line) {
      if (c != '\t' && std::iscntrl(static_cast<unsigned char>(c)) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("health file line ", line_no, ": a control character"));
      }
    }
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "health file line ", line_no, ": want \"<device-id>|* Healthy|Unhealthy\""));
    }
    bool healthy = false;
    if (fields[1] == kHealthy) {
      healthy = true;
    } else if (fields[1] != kUnhealthy) {
      return absl::InvalidArgumentError(absl::StrCat(
          "health file line ", line_no, ": the health is Healthy or Unhealthy, not \"",
          fields[1].substr(0, 64), "\""));
    }
    if (fields[0] == "*") {
      for (auto& [id, ok] : h) {
        ok = healthy;
      }
      continue;
    }
    auto it = h.find(std::string(fields[0]));
    if (it == h.end()) {
      return absl::InvalidArgumentError(absl::StrCat("health file line ", line_no,
                                                     ": no device \"",
                                                     fields[0].substr(0, 64), "\""));
    }
    it->second = healthy;
  }
  return h;
}

absl::Status CheckAllocation(const std::vector<std::string>& requested, const Health& devices) {
  if (requested.empty()) {
    return absl::InvalidArgumentError("an allocation request with no device");
  }
  std::set<absl::string_view> seen;
  for (const std::string& id : requested) {
    if (!devices.contains(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("no device \"", absl::string_view(id).substr(0, 64), "\" here"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("device \"", id, "\" requested twice"));
    }
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> AllocationEnv(absl::string_view resource,
                                                 const std::vector<std::string>& ids) {
  return {{"KMODD_TEST_DEVICES", absl::StrJoin(ids, ",")},
          {"KMODD_TEST_RESOURCE", std::string(resource)}};
}

std::vector<std::string> PreferredAllocation(const std::vector<std::string>& available,
                                             const std::vector<std::string>& must_include,
                                             int32_t size, const Health& devices) {
  std::vector<std::string> out;
  if (size <= 0) {
    return out;
  }
  std::set<std::string> taken;
  auto take = [&](const std::string& id) {
    if (out.size() < static_cast<size_t>(size) && devices.contains(id) &&
        taken.insert(id).second) {
      out.push_back(id);
    }
  };
  for (const std::string& id : must_include) {
    take(id);
  }
  std::vector<std::string> rest;
  for (const std::string& id : available) {
    if (devices.contains(id)) {
      rest.push_back(id);
    }
  }
  std::sort(rest.begin(), rest.end(), ByNumber);
  for (const std::string& id : rest) {
    take(id);
  }
  return out;
}

}  // namespace kmodd::test_device_plugin
