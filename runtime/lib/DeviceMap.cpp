//===- DeviceMap.cpp - which physical device each plan device runs on -----===//

#include "rp/runtime/DeviceMap.h"

#include <cstdlib>

using namespace rp::runtime;

Expected<std::vector<int>>
rp::runtime::mapPlanDevices(uint32_t devices, uint32_t count, const char *list,
                            const std::string &variable) {
  std::vector<int> map;
  if (!list || !*list) {
    if (count < devices)
      return unavailable(
          "the plan runs on " + std::to_string(devices) +
          " devices but this machine has " + std::to_string(count) +
          "; recompile it with rp-compile --devices " + std::to_string(count) +
          ", or set " + variable + " (e.g. " + variable +
          "=0,0) to run several of the plan's devices on one");
    for (uint32_t i = 0; i < devices; ++i)
      map.push_back(int(i));
    return map;
  }
  const std::string text(list);
  size_t at = 0;
  for (;;) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    char *end = nullptr;
    long number = item.empty() ? -1 : std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || number < 0 || number >= long(count))
      return invalidArgument(
          variable + "='" + text + "': '" + item +
          "' is not a device of this machine (it has " + std::to_string(count) +
          (count ? ": 0 to " + std::to_string(count - 1) : std::string()) +
          "); give one device number per plan device, e.g. " + variable +
          "=0,0");
    map.push_back(int(number));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  if (map.size() < devices)
    return invalidArgument(
        variable + "='" + text + "' names " + std::to_string(map.size()) +
        " device(s) but the plan runs on " + std::to_string(devices) +
        "; give one device number per plan device");
  map.resize(devices);
  return map;
}
