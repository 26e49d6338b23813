//===- CudnnLibrary.cpp - libcudnn opened at run time ---------------------===//

#include "CudnnLibrary.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

using namespace rp::runtime;
using namespace rp::runtime::cuda;

LoadedCudnn
rp::runtime::cuda::openCudnn(const char *off, const char *file,
                             const std::vector<std::string> &candidates) {
  LoadedCudnn out;
  if (off && (std::strcmp(off, "off") == 0 || std::strcmp(off, "0") == 0)) {
    out.info.where = std::string("RP_CUDNN=") + off;
    return out;
  }
  std::vector<std::string> tries;
  if (file && *file)
    tries.emplace_back(file);
  else
    tries = candidates;
  std::string failures;
  for (const std::string &name : tries) {
    // RTLD_LOCAL: cuDNN's symbols are looked up through this handle only
    // (the frontend's dynamic loading), never by the program.
    void *handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = dlerror();
      failures += (failures.empty() ? "" : "; ") + name + ": " +
                  (why ? why : "cannot be opened");
      continue;
    }
    using GetVersion = size_t (*)();
    auto version =
        reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
    if (!version) {
      failures += (failures.empty() ? "" : "; ") + name +
                  ": has no cudnnGetVersion (not a cuDNN library)";
      dlclose(handle);
      continue;
    }
    out.handle = handle;
    out.info.loaded = true;
    out.info.version = static_cast<int>(version());
    out.info.where = name;
    return out;
  }
  out.info.where = failures.empty() ? "no library named" : failures;
  if (file && *file)
    out.info.where += " (RP_CUDNN_LIBRARY)";
  return out;
}

const LoadedCudnn &rp::runtime::cuda::processCudnn() {
  static const LoadedCudnn loaded = [] {
    std::vector<std::string> candidates{"libcudnn.so.9"};
#ifdef RP_CUDNN_BUILD_LIBRARY
    // The cuDNN the build compiled against, where the loader's path does
    // not reach (CUDA's lib folder is often not in the ld cache).
    candidates.emplace_back(RP_CUDNN_BUILD_LIBRARY);
#endif
    return openCudnn(std::getenv("RP_CUDNN"), std::getenv("RP_CUDNN_LIBRARY"),
                     candidates);
  }();
  return loaded;
}
