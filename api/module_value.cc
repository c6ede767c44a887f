#include "api/module_value.h"

namespace kmodd::api {

Value TolerationValue(const Toleration& t) {
  Value v = Value::EmptyMap();
  if (!t.key.empty()) {
    v.Set("key", t.key);
  }
  if (!t.op.empty()) {
    v.Set("operator", t.op);
  }
  if (!t.value.empty()) {
    v.Set("value", t.value);
  }
  if (!t.effect.empty()) {
    v.Set("effect", t.effect);
  }
  if (t.toleration_seconds.has_value()) {
    v.Set("tolerationSeconds", *t.toleration_seconds);
  }
  return v;
}

}  // namespace kmodd::api
