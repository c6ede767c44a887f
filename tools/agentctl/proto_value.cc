#include "tools/agentctl/proto_value.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace kmodd::agentctl {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string EnumName(const FieldDescriptor* f, int number) {
  const auto* v = f->enum_type()->FindValueByNumber(number);
  return v != nullptr ? v->name() : absl::StrCat(number);
}

// One element: of a repeated field when index >= 0, else the singular field.
Value FieldValue(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return static_cast<int64_t>(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<int64_t>(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return static_cast<int64_t>(rep ? r->GetRepeatedUInt32(m, f, index)
                                      : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      // Value has no unsigned type; none of kmodd's fields come near 2^63.
      return static_cast<int64_t>(rep ? r->GetRepeatedUInt64(m, f, index)
                                      : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return absl::StrCat(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return absl::StrCat(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return EnumName(f, rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f));
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == FieldDescriptor::TYPE_BYTES) {
        return absl::Base64Escape(s);
      }
      return s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageValue(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

// Map entries are messages with a key (1) and a value (2); keys print as strings.
Value MapValue(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  const FieldDescriptor* key = f->message_type()->map_key();
  const FieldDescriptor* value = f->message_type()->map_value();
  std::vector<std::pair<std::string, Value>> entries;
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& e = r->GetRepeatedMessage(m, f, i);
    Value k = FieldValue(e, key, -1);
    std::string ks = k.IsString() ? k.AsString()
                     : k.IsBool() ? (k.AsBool() ? "true" : "false")
                                  : absl::StrCat(k.AsInt());
    entries.emplace_back(std::move(ks), FieldValue(e, value, -1));
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return Value(Value::Map(std::move(entries)));
}

}  // namespace

Value MessageValue(const Message& m) {
  const auto* d = m.GetDescriptor();
  Value out = Value::EmptyMap();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      out.Set(f->json_name(), MapValue(m, f));
    } else if (f->is_repeated()) {
      Value list = Value::EmptyList();
      for (int j = 0; j < m.GetReflection()->FieldSize(m, f); ++j) {
        list.Append(FieldValue(m, f, j));
      }
      out.Set(f->json_name(), std::move(list));
    } else {
      out.Set(f->json_name(), FieldValue(m, f, -1));
    }
  }
  return out;
}

}  // namespace kmodd::agentctl
