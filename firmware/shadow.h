#pragma once

// Staged firmware that hides the host's own. For request_firmware("NAME") the kernel tries,
// in order (drivers/base/firmware_loader/main.c: fw_path[] inside each suffix pass):
//
//   for suffix in "", ".zst", ".xz":           (the compressed passes when built in)
//     for dir in firmware_class.path (when set), /lib/firmware/updates/$(uname -r),
//                /lib/firmware/updates, /lib/firmware/$(uname -r), /lib/firmware:
//       dir/NAME<suffix>
//
// and loads the first file that exists. A file kmodd staged that the kernel now picks where,
// without it, it would have picked one of the host's files *shadows* that file. kmodd
// reports it and never refuses it: a driver image can load kernel code anyway, and KMM
// stages everything under firmwarePath too. /usr/lib/firmware is not in the kernel's list;
// on a merged-/usr host it is /lib/firmware and shows under that name.

#include <string>
#include <vector>

namespace kmodd::firmware {

struct FirmwareSearch {
  // Where the host's root is, as this process sees it: "/" on the host, a mount (e.g.
  // /host) in a container. The kernel's paths below are the host's.
  std::string host_root = "/";
  // The value of firmware_class.path ("" when unset), a host path.
  std::string class_path;
  std::string kernel_release;  // uname -r
};

struct Shadow {
  std::string path;       // the staged file, relative to the firmware directory
  std::string staged;     // firmware_dir/path
  std::string host_file;  // the host's file (a host path) the kernel no longer loads
};

// The directories the kernel searches, in its order (class_path first, when set).
std::vector<std::string> KernelFirmwareDirs(const FirmwareSearch& search);

// Of `paths` (relative, staged in `firmware_dir`), each one the kernel picks instead of a
// host file, with that file. Only regular files count, symlinks followed, as the kernel
// opens them. Reads the file system; never fails: what cannot be read is not there.
std::vector<Shadow> FindShadows(const FirmwareSearch& search, const std::string& firmware_dir,
                                const std::vector<std::string>& paths);

// The sentence kmodd reports for `s`, naming both files.
std::string ShadowWarning(const Shadow& s);

// "" when `param_file` (firmware_class's sysfs parameter) cannot be read; else its value
// without the trailing newline sysfs adds.
std::string ReadClassPath(const std::string& param_file);

}  // namespace kmodd::firmware
