//===- Device.cpp - the backends built into the runtime -------------------===//
//
// The registry is a table, not self-registration from static constructors:
// the backends live in static libraries, whose unreferenced objects (and
// their constructors) the linker would drop. A backend plugs in with one
// row here and its create function.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Device.h"
#include "rp/runtime/host/HostDevice.h"
#include "rp/runtime/sim/SimDevice.h"
#ifdef RP_HAVE_CUDA
#include "rp/runtime/cuda/CudaDevice.h"
#endif

using namespace rp::runtime;

namespace {

struct BackendEntry {
  const char *name;
  Expected<std::unique_ptr<Backend>> (*create)(const BackendOptions &);
};

Expected<std::unique_ptr<Backend>> createHost(const BackendOptions &options) {
  auto backend = host::HostBackend::create(options);
  if (!backend)
    return backend.getStatus();
  return std::unique_ptr<Backend>(std::move(*backend));
}

Expected<std::unique_ptr<Backend>> createSim(const BackendOptions &options) {
  auto backend = sim::SimBackend::create(options);
  if (!backend)
    return backend.getStatus();
  return std::unique_ptr<Backend>(std::move(*backend));
}

const BackendEntry kBackends[] = {
    {"host", createHost},
    {"sim", createSim},
#ifdef RP_HAVE_CUDA
    {"cuda", cuda::createBackend},
#endif
};

/// Backends DESIGN.md names that this build lacks, and what to do.
const std::pair<const char *, const char *> kMissing[] = {
#ifndef RP_HAVE_CUDA
    {"cuda", "the cuda backend is not built into this runtime (configure "
             "with the CUDA toolkit, RP_ENABLE_CUDA=ON), so no CUDA device "
             "can be opened; run on the host backend with --backend host"},
#endif
};

} // namespace

std::vector<std::string> rp::runtime::availableBackends() {
  std::vector<std::string> names;
  for (const BackendEntry &e : kBackends)
    names.push_back(e.name);
  return names;
}

Expected<std::unique_ptr<Backend>>
rp::runtime::createBackend(const std::string &name,
                           const BackendOptions &options) {
  for (const BackendEntry &e : kBackends)
    if (name == e.name)
      return e.create(options);
  std::string list;
  for (const std::string &n : availableBackends())
    list += (list.empty() ? "" : ", ") + n;
  for (const auto &[missing, why] : kMissing)
    if (name == missing)
      return unavailable(std::string(why) + " (built in: " + list + ")");
  return invalidArgument("unknown backend '" + name +
                         "'; this runtime has: " + list);
}

Expected<uint32_t> rp::runtime::countCudaDevices() {
#ifdef RP_HAVE_CUDA
  return cuda::countDevices();
#else
  return createBackend("cuda", BackendOptions()).getStatus();
#endif
}
