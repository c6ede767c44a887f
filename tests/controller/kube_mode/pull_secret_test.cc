#include "controller/kube_mode/pull_secret.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube_mode/kube_source.h"

namespace {

using kmodd::Value;

// A Secret object as the API server returns it: ns/pull, of `type`, with `data`.
Value SecretObject(const std::string& type, const Value& data) {
  Value meta = Value::EmptyMap();
  meta.Set("name", "pull");
  meta.Set("namespace", "ns");
  Value s = Value::EmptyMap();
  s.Set("metadata", std::move(meta));
  if (!type.empty()) {
    s.Set("type", type);
  }
  s.Set("data", data);
  return s;
}

// data: {".dockerconfigjson": base64(content)}
Value DockerConfigData(const std::string& content) {
  Value data = Value::EmptyMap();
  data.Set(".dockerconfigjson", absl::Base64Escape(content));
  return data;
}

std::string Nested(int depth) {
  return absl::StrCat(R"({"auths":{"r":{"auth":"dTpw","x":)", std::string(depth, '['),
                      std::string(depth, ']'), "}}}");
}

std::string ManyEntries(int n) {
  std::string out = R"({"auths":{)";
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", "\"r", i, "\":{}");
  }
  return out + "}}";
}

constexpr char kType[] = "kubernetes.io/dockerconfigjson";
constexpr char kGood[] = R"({"auths":{"reg:5000":{"username":"u","password":"p","auth":"dTpw"}}})";

}  // namespace

TEST_CASE("a pull Secret is accepted only as a kubernetes.io/dockerconfigjson with content a node can use") {
  struct Row {
    const char* what;
    std::string type;
    Value data;
    // "" = accepted and returned as decoded; else the status code's reason and a part of
    // the message (which always begins "Secret ns/pull").
    const char* reason;
    std::string message;
  };
  const std::string long_key = std::string(1000, 'k') + "\n";
  const std::vector<Row> rows = {
      {"kubectl create secret docker-registry's shape", kType, DockerConfigData(kGood), "", ""},
      {"null fields are not set (as Go reads them)", kType,
       DockerConfigData(R"({"auths":{"r":{"auth":null,"username":"u","password":"p"}}})"), "", ""},
      {"no registries at all", kType, DockerConfigData(R"({"auths":{}})"), "", ""},
      {"a repeated key keeps its last value, as the agent's parser and Go's read it", kType,
       DockerConfigData(R"({"auths":{"r":{"auth":5},"r":{"auth":"dTpw"}}})"), "", ""},
      {"the same, the other way round", kType,
       DockerConfigData(R"({"auths":{"r":{"auth":"dTpw"},"r":{"auth":5}}})"), "InvalidContent",
       R"(auths["r"].auth: expected a string, got a number)"},

      {"an Opaque Secret, even with a .dockerconfigjson", "Opaque", DockerConfigData(kGood),
       "WrongType", "is of type Opaque, not kubernetes.io/dockerconfigjson (field type)"},
      {"the legacy kubernetes.io/dockercfg", "kubernetes.io/dockercfg", DockerConfigData(kGood),
       "WrongType", "is of type kubernetes.io/dockercfg"},
      {"a service account token", "kubernetes.io/service-account-token", DockerConfigData(kGood),
       "WrongType", "is of type kubernetes.io/service-account-token"},
      {"no type at all", "", DockerConfigData(kGood), "WrongType", "is of type Opaque"},
      {"the right type without the key", kType, Value::EmptyMap(), "WrongType",
       R"(has no data[".dockerconfigjson"])"},
      {"the key, not a string", kType, Value(Value::Map{{".dockerconfigjson", Value(5)}}),
       "WrongType", R"(has no data[".dockerconfigjson"])"},

      {"not base64", kType, Value(Value::Map{{".dockerconfigjson", Value("!!not base64!!")}}),
       "InvalidContent", R"(data[".dockerconfigjson"]: not base64)"},
      {"not JSON", kType, DockerConfigData("{auths: {}}"), "InvalidContent",
       R"(data[".dockerconfigjson"]: not valid JSON: )"},
      {"trailing bytes after the object", kType, DockerConfigData(R"({"auths":{}} x)"),
       "InvalidContent", "not valid JSON"},
      {"not UTF-8", kType, DockerConfigData("{\"auths\":{\"r\xff\":{}}}"), "InvalidContent",
       "not valid JSON"},
      {"a number with a fraction (the agent's parser takes none)", kType,
       DockerConfigData(R"({"auths":{"r":{"auth":"dTpw","n":1.5}}})"), "InvalidContent",
       "not valid JSON"},
      {"a list, not an object", kType, DockerConfigData("[]"), "InvalidContent",
       "expected a JSON object, got a list"},
      {"no auths", kType, DockerConfigData(R"({"credsStore":"desktop"})"), "InvalidContent",
       R"(no "auths" object)"},
      {"auths null", kType, DockerConfigData(R"({"auths":null})"), "InvalidContent",
       R"(no "auths" object)"},
      {"auths a list", kType, DockerConfigData(R"({"auths":[]})"), "InvalidContent",
       "auths: expected an object, got a list"},
      {"auths a string", kType, DockerConfigData(R"({"auths":"r"})"), "InvalidContent",
       "auths: expected an object, got a string"},
      {"an entry not an object", kType, DockerConfigData(R"({"auths":{"r":"dTpw"}})"),
       "InvalidContent", R"(auths["r"]: expected an object, got a string)"},
      {"an entry that is not the registry in use is checked too", kType,
       DockerConfigData(R"({"auths":{"reg:5000":{"auth":"dTpw"},"other":[1]}})"),
       "InvalidContent", R"(auths["other"]: expected an object, got a list)"},
      {"auth not a string", kType, DockerConfigData(R"({"auths":{"r":{"auth":5}}})"),
       "InvalidContent", R"(auths["r"].auth: expected a string, got a number)"},
      {"username an object", kType, DockerConfigData(R"({"auths":{"r":{"username":{}}}})"),
       "InvalidContent", R"(auths["r"].username: expected a string, got an object)"},
      {"password a boolean", kType, DockerConfigData(R"({"auths":{"r":{"password":true}}})"),
       "InvalidContent", R"(auths["r"].password: expected a string, got a boolean)"},
      {"auth not base64", kType, DockerConfigData(R"({"auths":{"r":{"auth":"%%%"}}})"),
       "InvalidContent", R"(auths["r"].auth: not base64)"},
      {"auth without user:password", kType, DockerConfigData(R"({"auths":{"r":{"auth":"dXNlcg=="}}})"),
       "InvalidContent", R"(auths["r"].auth: must be base64 of user:password)"},
      {"huge", kType,
       DockerConfigData(absl::StrCat(R"({"auths":{"r":{"auth":"dTpw","x":")",
                                     std::string(300 << 10, 'a'), "\"}}}")),
       "InvalidContent", "more than the 262144 a pull secret may hold"},
      {"deeply nested", kType, DockerConfigData(Nested(100)), "InvalidContent", "not valid JSON"},
      {"nested as deep as the agent takes", kType, DockerConfigData(Nested(28)), "", ""},
      {"more entries than the agent takes", kType, DockerConfigData(ManyEntries(10001)),
       "InvalidContent", "not valid JSON"},
      {"a hostile key is shown escaped and cut short", kType,
       DockerConfigData(absl::StrCat(R"({"auths":{")", std::string(1000, 'k'), R"(\n":1}})")),
       "InvalidContent",
       absl::StrCat(R"(auths[")", std::string(64, 'k'), R"(..."]: expected an object, got a number)")},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    absl::StatusOr<std::string> got =
        kmodd::source::DockerConfigFromSecret(SecretObject(row.type, row.data));
    if (std::string(row.reason).empty()) {
      REQUIRE(got.ok());
      std::string want;
      REQUIRE(absl::Base64Unescape(kmodd::StringAt(row.data, {".dockerconfigjson"}), &want));
      CHECK(*got == want);
      continue;
    }
    REQUIRE_FALSE(got.ok());
    INFO(got.status().ToString());
    CHECK(got.status().message().rfind("Secret ns/pull", 0) == 0);
    CHECK(got.status().message().find(row.message) != std::string::npos);
    CHECK(got.status().message().size() < 400);
    // What the Module's PullSecretResolved condition says: the Secret, the field, the fix.
    std::optional<kmodd::server::PullSecretState> state =
        kmodd::source::PullSecretProblem("ns/pull", got.status());
    REQUIRE(state);
    CHECK_FALSE(state->readable);
    CHECK(state->reason == row.reason);
    CHECK(state->message.rfind(std::string(got.status().message()), 0) == 0);
    CHECK(state->message.find("kubectl create secret docker-registry pull -n ns") !=
          std::string::npos);
  }
}

TEST_CASE("the shape check reads what the agent reads: auths entries with string fields") {
  CHECK(kmodd::source::CheckDockerConfig(kGood).ok());
  CHECK(kmodd::source::CheckDockerConfig(R"({"auths":{"r":{"auth":""}},"credsStore":"x"})").ok());
  CHECK(kmodd::source::CheckDockerConfig(R"({"auths":{"r":{"identitytoken":"t"}}})").ok());
  absl::Status huge =
      kmodd::source::CheckDockerConfig(std::string(kmodd::source::kMaxDockerConfigBytes + 1, ' '));
  CHECK(absl::IsInvalidArgument(huge));
  CHECK(huge.message().find("more than the") != std::string::npos);
}

namespace {

TEST_CASE("a signing Secret's value: decoded, or refused naming the Secret and the field") {
  using kmodd::source::SecretValue;
  Value data = Value::EmptyMap();
  data.Set("key", absl::Base64Escape("-----BEGIN PRIVATE KEY-----\n..."));
  auto v = SecretValue(SecretObject("Opaque", data), "key", 1 << 20);
  REQUIRE(v.ok());
  CHECK(*v == "-----BEGIN PRIVATE KEY-----\n...");

  struct Case {
    std::string name;
    Value data;
    std::string message;
  };
  auto with = [](const std::string& k, Value v) {
    Value d = Value::EmptyMap();
    d.Set(k, std::move(v));
    return d;
  };
  const std::vector<Case> cases = {
      {"no such key", with("cert", "Zm9v"), "Secret ns/pull has no data[\"key\"]"},
      {"a number", with("key", 5), "data[\"key\"]: expected a string, got a number"},
      {"a map", with("key", Value::EmptyMap()), "expected a string, got an object"},
      {"not base64", with("key", "!!!not base64!!!"), "data[\"key\"]: not base64"},
      {"empty", with("key", ""), "data[\"key\"]: empty"},
      {"too large", with("key", std::string(2 << 20, 'A')), "more than 1048576"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto r = SecretValue(SecretObject("Opaque", c.data), "key", 1 << 20);
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(std::string(r.status().message()), Catch::Contains(c.message));
    }
  }
  SECTION("no data at all") {
    Value s = SecretObject("Opaque", Value::EmptyMap());
    auto r = SecretValue(s, "key", 1 << 20);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("has no data[\"key\"]"));
  }
}

}  // namespace
