//===- DeviceMap.h - which physical device each plan device runs on -*- C++
//-*-===//
//
// A backend of physical devices (GPUs) opens one per plan device. The map
// says which: by default plan device i on device i, or a list the user
// gives (RP_CUDA_GPUS=0,0 runs a two-device plan on GPU 0 twice), so that a
// box with fewer GPUs than the plan can still run it, e.g. to test the
// multi-device protocol on one GPU. Kept apart from the backends so that
// it is tested without any device.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_DEVICEMAP_H
#define RP_RUNTIME_DEVICEMAP_H

#include "rp/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace rp::runtime {

/// The physical device of each of the plan's `devices`, on a machine with
/// `count` of them. `list` (null or empty: none given) is the value of the
/// variable named `variable`: comma-separated device numbers, one per plan
/// device; entries past the plan's devices are unused (as with
/// CUDA_VISIBLE_DEVICES). Without a list, plan device i is device i, and a
/// plan for more devices than `count` is Unavailable, naming both ways out.
/// A bad entry, or too few, is InvalidArgument naming the list.
Expected<std::vector<int>> mapPlanDevices(uint32_t devices, uint32_t count,
                                          const char *list,
                                          const std::string &variable);

} // namespace rp::runtime

#endif // RP_RUNTIME_DEVICEMAP_H
