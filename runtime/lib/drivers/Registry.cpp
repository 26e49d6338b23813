//===- Registry.cpp - the backends of this runtime, by name ---------------===//
//
// Linked drivers register themselves the first time the registry is used
// (registerLinkedDrivers, generated from the build's list); loadable ones
// are opened with dlopen the first time their backend is asked for, so a
// host run never maps the CUDA runtime. A loadable driver's library is
// looked for in the folders of RP_DRIVER_PATH when it is set, else next to
// the running program (rp-run's bin/), then in the folder the build wrote
// it to.
//
//===----------------------------------------------------------------------===//

#include "rp/runtime/Driver.h"

#include "DriverList.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

using namespace rp::runtime;

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<Driver> drivers;
  /// Loadable drivers whose library failed to load, and why; tried once.
  std::vector<std::pair<std::string, Status>> loadFailures;
};

Registry &registry() {
  static Registry r;
  return r;
}

const Driver *findLocked(Registry &r, const std::string &name) {
  for (const Driver &d : r.drivers)
    if (name == d.name)
      return &d;
  return nullptr;
}

void addLocked(Registry &r, const Driver &driver) {
  for (Driver &d : r.drivers)
    if (std::string(d.name) == driver.name) {
      d = driver;
      return;
    }
  r.drivers.push_back(driver);
}

std::once_flag linkedOnce;
/// True on the thread running the linked drivers' registerDriver calls,
/// which call rp::runtime::registerDriver from inside the call_once.
thread_local bool registeringLinked = false;

/// Lets the linked drivers register themselves, once, before anything
/// else reads or changes the registry (so a later registerDriver of the
/// same name replaces a linked driver, never the other way round).
void ensureLinked() {
  if (registeringLinked)
    return;
  std::call_once(linkedOnce, [] {
    registeringLinked = true;
    detail::registerLinkedDrivers();
    registeringLinked = false;
  });
}

/// The linked drivers, then the loadable ones; callers hold the mutex.
std::vector<std::string> namesLocked(const Registry &r) {
  std::vector<std::string> names;
  names.reserve(r.drivers.size());
  for (const Driver &d : r.drivers)
    names.emplace_back(d.name);
  for (const detail::LoadableDriver &l : detail::loadableDrivers())
    if (std::find(names.begin(), names.end(), l.name) == names.end())
      names.emplace_back(l.name);
  return names;
}

const detail::LoadableDriver *findLoadable(const std::string &name) {
  for (const detail::LoadableDriver &l : detail::loadableDrivers())
    if (name == l.name)
      return &l;
  return nullptr;
}

/// The folders a loadable driver's library is looked for in, in order:
/// RP_DRIVER_PATH's when it is set (a ':'-separated list; only those, so
/// that a test or a deployment says exactly where), else the running
/// program's folder and the build's.
std::vector<std::filesystem::path> searchFolders() {
  std::vector<std::filesystem::path> folders;
  if (const char *env = std::getenv("RP_DRIVER_PATH")) {
    std::string list = env;
    for (size_t begin = 0; begin <= list.size();) {
      size_t end = list.find(':', begin);
      if (end == std::string::npos)
        end = list.size();
      if (end > begin)
        folders.emplace_back(list.substr(begin, end - begin));
      begin = end + 1;
    }
    return folders;
  }
  std::error_code ec;
  std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    folders.push_back(self.parent_path());
  if (*detail::kBuildDriverFolder &&
      (folders.empty() || folders[0] != detail::kBuildDriverFolder))
    folders.emplace_back(detail::kBuildDriverFolder);
  return folders;
}

/// dlopens `loadable`'s library and returns its Driver; Unavailable saying
/// where it looked or why it would not load.
Expected<Driver> loadDriver(const detail::LoadableDriver &loadable) {
  std::vector<std::filesystem::path> folders = searchFolders();
  std::string looked;
  for (const std::filesystem::path &folder : folders) {
    std::filesystem::path file = folder / loadable.file;
    looked += (looked.empty() ? "" : ", ") + folder.string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec))
      continue;
    // RTLD_LOCAL: the library's own copies of the runtime's code stay its
    // own; nothing else links against it.
    void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      return unavailable(std::string("the ") + loadable.name +
                         " driver library '" + file.string() +
                         "' does not load (" + dlerror() + "); " +
                         loadable.hint);
    std::string symbol = std::string(kDriverEntryPrefix) + loadable.name;
    auto entry = reinterpret_cast<DriverEntry>(dlsym(handle, symbol.c_str()));
    const Driver *driver = entry ? entry() : nullptr;
    if (!driver || driver->abiVersion != kDriverAbiVersion || !driver->create ||
        std::string(driver->name) != loadable.name)
      return unavailable("'" + file.string() + "' is not a " + loadable.name +
                         " driver of this runtime (no " + symbol +
                         ", or one of another build); rebuild it with this "
                         "rp-run");
    // The library stays loaded until the process exits: its backends'
    // code must outlive every object they made.
    return *driver;
  }
  return unavailable(std::string("the ") + loadable.name + " driver library " +
                     loadable.file + " was not found (looked in: " + looked +
                     "); put it next to rp-run or name its folder in "
                     "RP_DRIVER_PATH, or " +
                     loadable.hint);
}

/// The driver of `name`: a linked one, or a loadable one loaded now; the
/// reason when there is none.
Expected<Driver> getDriver(const std::string &name) {
  ensureLinked();
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (const Driver *d = findLocked(r, name))
    return *d;
  for (const auto &[failed, why] : r.loadFailures)
    if (failed == name)
      return why;
  if (const detail::LoadableDriver *loadable = findLoadable(name)) {
    Expected<Driver> loaded = loadDriver(*loadable);
    if (!loaded) {
      r.loadFailures.emplace_back(name, loaded.getStatus());
      return loaded.getStatus();
    }
    addLocked(r, *loaded);
    return *loaded;
  }
  std::string list;
  for (const std::string &n : namesLocked(r))
    list += (list.empty() ? "" : ", ") + n;
  for (const detail::MissingDriver &m : detail::missingDrivers())
    if (name == m.name)
      return unavailable(std::string(m.why) + " (built in: " + list + ")");
  return invalidArgument("unknown backend '" + name +
                         "'; this runtime has: " + list);
}

} // namespace

void rp::runtime::registerDriver(const Driver &driver) {
  ensureLinked();
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  addLocked(r, driver);
}

std::vector<std::string> rp::runtime::availableBackends() {
  ensureLinked();
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return namesLocked(r);
}

Expected<std::unique_ptr<Backend>>
rp::runtime::createBackend(const std::string &name,
                           const BackendOptions &options) {
  Expected<Driver> driver = getDriver(name);
  if (!driver)
    return driver.getStatus();
  return driver->create(options);
}

Expected<uint32_t> rp::runtime::countDevices(const std::string &name) {
  Expected<Driver> driver = getDriver(name);
  if (!driver)
    return driver.getStatus();
  if (!driver->countDevices)
    return invalidArgument("the " + name +
                           " backend opens as many devices as asked for; "
                           "there is nothing to count");
  return driver->countDevices();
}

Expected<std::unique_ptr<Communicator>>
rp::runtime::createDriverCommunicator(const std::string &name,
                                      const Rendezvous &info,
                                      const CommTimeouts &timeouts) {
  Expected<Driver> driver = getDriver(name);
  if (!driver)
    return driver.getStatus();
  if (!driver->createCommunicator)
    return unsupported("the " + name +
                       " driver was built without its collective library "
                       "(NCCL for cuda); rebuild it where that library is "
                       "installed, or train on one process");
  return driver->createCommunicator(info, timeouts);
}

std::string rp::runtime::describeDriverAttention(const std::string &name) {
  Expected<Driver> driver = getDriver(name);
  return driver && driver->describeAttention ? driver->describeAttention()
                                             : std::string();
}

bool rp::runtime::driverHasCommunicator(const std::string &name) {
  Expected<Driver> driver = getDriver(name);
  return driver && driver->createCommunicator;
}
