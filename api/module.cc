#include "api/module.h"

namespace kmodd::api {

const std::string& ModprobeSpec::EffectiveDirName() const {
  static const std::string kDefault = kDefaultDirName;
  return dir_name.empty() ? kDefault : dir_name;
}

const std::string& ModuleLoaderSpec::EffectiveServiceAccountName() const {
  static const std::string kDefault = kDefaultServiceAccountName;
  return service_account_name.empty() ? kDefault : service_account_name;
}

}  // namespace kmodd::api
