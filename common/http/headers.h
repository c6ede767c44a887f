#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kmodd::http {

// HTTP header fields in the order received or added. Names compare case-insensitively; a
// name may repeat (WWW-Authenticate with several challenges comes as several fields).
class Headers {
 public:
  using Field = std::pair<std::string, std::string>;

  Headers() = default;
  Headers(std::initializer_list<Field> fields);

  // Appends a field, keeping any others of the same name.
  void Add(std::string name, std::string value);
  // Replaces every field of this name with one.
  void Set(std::string name, std::string value);
  void Remove(std::string_view name);

  bool Has(std::string_view name) const;
  // The first field's value, if any.
  std::optional<std::string> Get(std::string_view name) const;
  // Every field's value, in order.
  std::vector<std::string> GetAll(std::string_view name) const;

  const std::vector<Field>& fields() const { return fields_; }
  bool empty() const { return fields_.empty(); }

 private:
  std::vector<Field> fields_;
};

}  // namespace kmodd::http
