//===- Driver.h - how a device library plugs into the runtime ---*- C++ -*-===//
//
// A driver is one device library (host, sim, cuda): it opens a Backend by
// name. The registry (lib/drivers/) knows two kinds:
//  - linked drivers, static libraries that register themselves through
//    their registerDriver() when the registry is first used; the list of
//    them is generated from the build's driver list (lib/drivers/
//    CMakeLists.txt), as the linker would drop a static constructor;
//  - loadable drivers, shared libraries opened with dlopen the first time
//    their backend is asked for: the cuda driver, so that a run on the host
//    neither loads nor pays for the CUDA runtime and cuBLAS. Such a library
//    exports `rp_driver_<name>` (kDriverEntryPrefix + name), a C function
//    returning its Driver.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_DRIVER_H
#define RP_RUNTIME_DRIVER_H

#include "rp/runtime/Comm.h"
#include "rp/runtime/Device.h"

#include <cstdint>
#include <memory>
#include <string>

namespace rp::runtime {

/// Bumped whenever Driver, Backend, Device, Queue or Event change layout,
/// so that a loadable driver from another build is refused, not crashed in.
constexpr uint32_t kDriverAbiVersion = 3;

struct Driver {
  uint32_t abiVersion = kDriverAbiVersion;
  /// The backend name rp-run's --backend takes: "host", "cuda", "sim".
  const char *name = nullptr;
  /// Opens `options.devices` devices; Unavailable saying why when it cannot.
  Expected<std::unique_ptr<Backend>> (*create)(const BackendOptions &) =
      nullptr;
  /// How many devices create() can open on this machine; Unavailable saying
  /// why when none. Null for drivers whose devices are not counted (host,
  /// sim: as many as asked for).
  Expected<uint32_t> (*countDevices)() = nullptr;
  /// Joins a data-parallel job with the driver's own collective library
  /// (cuda: NCCL, built into the driver's library so that only a cuda run
  /// maps it); null for drivers whose runs sum over Gloo (host, sim).
  Expected<std::unique_ptr<Communicator>> (*createCommunicator)(
      const Rendezvous &, const CommTimeouts &) = nullptr;
  /// Lines saying which kernel library runs each device's attention (cuda:
  /// cuDNN's fused SDPA or the CUDA-core kernel, and why; AttentionPath.h),
  /// for rp-run --list-devices; null for drivers with one kernel of each op.
  std::string (*describeAttention)() = nullptr;
};

/// The symbol a loadable driver exports, followed by its name.
constexpr const char *kDriverEntryPrefix = "rp_driver_";
/// The C signature of that symbol.
using DriverEntry = const Driver *(*)();

/// The driver of backend class `B`, whose `B::create(options)` returns an
/// Expected<std::unique_ptr<B>>: what a linked driver registers.
template <typename B> Driver driverOf(const char *name) {
  Driver driver;
  driver.name = name;
  driver.create =
      [](const BackendOptions &options) -> Expected<std::unique_ptr<Backend>> {
    auto backend = B::create(options);
    if (!backend)
      return backend.getStatus();
    return std::unique_ptr<Backend>(std::move(*backend));
  };
  return driver;
}

/// Adds a linked driver; a second driver of the same name replaces the
/// first (tests may stand in for a device).
void registerDriver(const Driver &driver);

/// How many devices backend `name` can open on this machine (loading its
/// library if it is a loadable driver); Unavailable saying why when none,
/// or when the backend is not built or its library cannot be loaded.
Expected<uint32_t> countDevices(const std::string &name);

/// Joins a data-parallel job through backend `name`'s own communicator
/// (loading its library if it is a loadable driver); Unsupported saying
/// why when the driver has none (built without its collective library).
Expected<std::unique_ptr<Communicator>>
createDriverCommunicator(const std::string &name, const Rendezvous &info,
                         const CommTimeouts &timeouts);

/// The driver's attention lines (Driver::describeAttention), empty when it
/// has none or cannot be loaded.
std::string describeDriverAttention(const std::string &name);

/// Whether backend `name`'s driver brings its own communicator (false
/// when it has none or cannot be loaded).
bool driverHasCommunicator(const std::string &name);

} // namespace rp::runtime

#endif // RP_RUNTIME_DRIVER_H
