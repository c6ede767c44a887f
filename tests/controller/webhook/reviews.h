#pragma once
// AdmissionReview bodies as kube-apiserver sends them, for the webhook's tests.

#include <string>

#include "absl/strings/str_replace.h"

namespace kmodd::testing {

// A Module as the API server puts it in a review (defaults applied, managedFields cut).
inline std::string ModuleJson(const std::string& mappings, const std::string& extra_meta = "") {
  return absl::StrReplaceAll(R"({
    "apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module",
    "metadata": {"name": "kmm-ci-a", "namespace": "kmm-demo", "generation": 1,
                 "uid": "0b5c3c1e-7d1b-4a36-8c55-0d1f0c6b8f11",
                 "creationTimestamp": "2026-01-01T00:00:00Z"EXTRA},
    "spec": {"selector": {"node-role.kubernetes.io/worker": ""},
             "moduleLoader": {"container": {"modprobe": {"moduleName": "kmm_ci_a"},
                                            "kernelMappings": MAPPINGS}}}})",
                             {{"MAPPINGS", mappings}, {"EXTRA", extra_meta}});
}

inline constexpr char kGood[] = R"([{"regexp": "^.+$", "containerImage": "r.example/kmm-ci-a:$KERNEL_FULL_VERSION"}])";

// The body the API server POSTs (admission.k8s.io/v1), as captured from kube-apiserver 1.34.
inline std::string Review(const std::string& operation, const std::string& object,
                   const std::string& old_object = "null") {
  return absl::StrReplaceAll(R"({
    "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
    "request": {
      "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
      "kind": {"group": "kmm.sigs.x-k8s.io", "version": "v1beta1", "kind": "Module"},
      "resource": {"group": "kmm.sigs.x-k8s.io", "version": "v1beta1", "resource": "modules"},
      "requestKind": {"group": "kmm.sigs.x-k8s.io", "version": "v1beta1", "kind": "Module"},
      "requestResource": {"group": "kmm.sigs.x-k8s.io", "version": "v1beta1", "resource": "modules"},
      "name": "kmm-ci-a", "namespace": "kmm-demo", "operation": "OP",
      "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
      "object": OBJECT, "oldObject": OLD, "dryRun": false,
      "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply"}
    }})",
                             {{"OP", operation}, {"OBJECT", object}, {"OLD", old_object}});
}

}  // namespace kmodd::testing
