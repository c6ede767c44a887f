#include <catch2/catch.hpp>

#include "controller/placement/selection.h"

using kmodd::api::Taint;
using kmodd::api::Toleration;
using kmodd::placement::FirstSelectorMismatch;
using kmodd::placement::FirstUntoleratedNoExecute;
using kmodd::placement::Tolerates;

TEST_CASE("selectors match by label equality, and an empty selector matches every node") {
  const std::map<std::string, std::string> labels{{"role", "gpu"}, {"zone", "a"}};
  CHECK_FALSE(FirstSelectorMismatch({}, labels).has_value());
  CHECK_FALSE(FirstSelectorMismatch({{"role", "gpu"}}, labels).has_value());
  CHECK(FirstSelectorMismatch({{"role", "nic"}}, labels) == "role");
  CHECK(FirstSelectorMismatch({{"role", "gpu"}, {"rack", "1"}}, labels) == "rack");
  // A label selected with an empty value must exist with an empty value.
  CHECK(FirstSelectorMismatch({{"worker", ""}}, labels) == "worker");
  CHECK_FALSE(FirstSelectorMismatch({{"worker", ""}}, {{"worker", ""}}).has_value());
}

TEST_CASE("tolerations match taints as Kubernetes matches them") {
  const Taint t{"maint", "yes", "NoExecute"};
  struct Row {
    Toleration tol;
    bool want;
  };
  const Row rows[] = {
      {{"maint", "Exists", "", "", {}}, true},
      {{"maint", "Equal", "yes", "NoExecute", {}}, true},
      {{"maint", "", "yes", "", {}}, true},
      {{"maint", "Equal", "no", "", {}}, false},
      {{"maint", "Exists", "", "NoSchedule", {}}, false},
      {{"other", "Exists", "", "", {}}, false},
      {{"", "Exists", "", "", {}}, true},  // tolerates everything
      {{"maint", "Bogus", "yes", "", {}}, false},
  };
  for (const auto& r : rows) {
    INFO(r.tol.key << " " << r.tol.op << " " << r.tol.value << " " << r.tol.effect);
    CHECK(Tolerates(r.tol, t) == r.want);
  }
}

TEST_CASE("only NoExecute taints keep a module off a node") {
  const std::vector<Taint> taints{{"a", "", "NoSchedule"},
                                  {"b", "", "PreferNoSchedule"},
                                  {"node.kubernetes.io/unschedulable", "", "NoSchedule"}};
  CHECK(FirstUntoleratedNoExecute(taints, {}) == nullptr);
  const std::vector<Taint> evicting{{"a", "", "NoSchedule"}, {"gone", "x", "NoExecute"}};
  const Taint* hit = FirstUntoleratedNoExecute(evicting, {});
  REQUIRE(hit != nullptr);
  CHECK(hit->key == "gone");
  CHECK(FirstUntoleratedNoExecute(evicting, {{"gone", "Exists", "", "", {}}}) == nullptr);
}
