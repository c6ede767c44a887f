#include "controller/kube_mode/module_policies.h"

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "api/decode.h"

namespace kmodd::source {

namespace {

std::string ObjectKey(const Value& o) {
  std::string ns = StringAt(o, {"metadata", "namespace"});
  return absl::StrCat(ns.empty() ? "default" : ns, "/", StringAt(o, {"metadata", "name"}));
}

}  // namespace

void PolicyIndex::Absorb(const Value& object) {
  const std::string key = ObjectKey(object);
  // A list item has no kind or apiVersion; the decoder needs both.
  const std::string doc =
      ToJsonLine(With(With(object, "apiVersion", api::kKmoddGroupVersion), "kind", "ModulePolicy"));
  api::Decoded d = api::DecodeDocuments(doc, absl::StrCat("ModulePolicy ", key));
  if (!d.errors.empty() || d.policies.size() != 1) {
    objects_.erase(key);
    problems_[key] = d.errors.empty()
                         ? absl::StrCat("ModulePolicy ", key, ": not decoded")
                         : absl::StrCat("ModulePolicy ", key, ": ", d.errors.front().path, ": ",
                                        d.errors.front().message, "; it is ignored until fixed");
    return;
  }
  problems_.erase(key);
  objects_.insert_or_assign(key, std::move(d.policies.front().object));
}

std::map<std::string, api::ModulePolicy> PolicyIndex::ByModule() {
  std::map<std::string, api::ModulePolicy> out;
  for (const auto& [key, p] : objects_) {  // by object key: the first name governs
    auto [it, fresh] = out.emplace(p.ModuleKey(), p);
    if (!fresh) {
      problems_[key] = absl::StrCat("ModulePolicy ", key, ": Module ", p.ModuleKey(),
                                    " already has ModulePolicy ", it->second.Key(),
                                    ", which governs it; delete one of them");
    } else if (auto pr = problems_.find(key);
               pr != problems_.end() && pr->second.find("already has") != std::string::npos) {
      problems_.erase(pr);
    }
  }
  return out;
}

std::map<std::string, api::ModulePolicy> PolicyIndex::Sync(const std::vector<Value>& objects) {
  objects_.clear();
  problems_.clear();
  for (const Value& o : objects) {
    Absorb(o);
  }
  last_ = ByModule();
  return last_;
}

std::optional<std::map<std::string, api::ModulePolicy>> PolicyIndex::Apply(kube::EventType type,
                                                                           const Value& object) {
  if (type == kube::EventType::kBookmark) {
    return std::nullopt;
  }
  if (type == kube::EventType::kDeleted) {
    const std::string key = ObjectKey(object);
    objects_.erase(key);
    problems_.erase(key);
  } else {
    Absorb(object);
  }
  std::map<std::string, api::ModulePolicy> next = ByModule();
  if (next == last_) {
    return std::nullopt;
  }
  last_ = next;
  return next;
}

std::vector<std::string> PolicyIndex::TakeProblems() {
  std::vector<std::string> out;
  for (const auto& [key, problem] : problems_) {
    auto it = told_.find(key);
    if (it == told_.end() || it->second != problem) {
      out.push_back(problem);
    }
  }
  told_ = problems_;
  return out;
}

}  // namespace kmodd::source
