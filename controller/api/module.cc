#include "controller/api/module.h"

namespace kmodd::api {

const std::string& ModprobeSpec::EffectiveDirName() const {
  static const std::string kDefault = kDefaultDirName;
  return dir_name.empty() ? kDefault : dir_name;
}

}  // namespace kmodd::api
