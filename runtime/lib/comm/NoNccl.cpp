//===- NoNccl.cpp - the NCCL communicator of a build without CUDA ---------===//

#include "rp/runtime/Comm.h"

using namespace rp::runtime;

bool rp::runtime::ncclBuiltIn() { return false; }

Expected<std::unique_ptr<Communicator>>
rp::runtime::createNcclCommunicator(const Rendezvous &, const CommTimeouts &) {
  return unsupported("this rp-run was built without CUDA, so without NCCL; "
                     "use the host backend (Gloo) or a build with CUDA");
}
