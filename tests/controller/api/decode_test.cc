#include <catch2/catch.hpp>

#include "controller/api/decode.h"

using kmodd::api::DecodeDocuments;

TEST_CASE("decoder reads a minimal Module") {
  auto d = DecodeDocuments(R"(
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: m, namespace: ns}
spec:
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - regexp: '^.+$'
          containerImage: reg.example/x:$KERNEL_FULL_VERSION
)", "t.yaml");
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 1);
  CHECK(d.modules[0].object.spec.module_loader->container.kernel_mappings[0].regexp == "^.+$");
}
