#include "common/http/headers.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace kmodd::http {
namespace {

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return absl::ascii_tolower(static_cast<unsigned char>(x)) ==
                  absl::ascii_tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Headers::Headers(std::initializer_list<Field> fields) : fields_(fields) {}

void Headers::Add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
}

void Headers::Set(std::string name, std::string value) {
  Remove(name);
  Add(std::move(name), std::move(value));
}

void Headers::Remove(std::string_view name) {
  std::erase_if(fields_, [&](const Field& f) { return SameName(f.first, name); });
}

bool Headers::Has(std::string_view name) const { return Get(name).has_value(); }

std::optional<std::string> Headers::Get(std::string_view name) const {
  for (const Field& f : fields_) {
    if (SameName(f.first, name)) {
      return f.second;
    }
  }
  return std::nullopt;
}

std::vector<std::string> Headers::GetAll(std::string_view name) const {
  std::vector<std::string> values;
  for (const Field& f : fields_) {
    if (SameName(f.first, name)) {
      values.push_back(f.second);
    }
  }
  return values;
}

}  // namespace kmodd::http
