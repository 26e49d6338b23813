//===- NoGloo.cpp - the Gloo communicator of a build without Gloo ---------===//

#include "rp/runtime/Comm.h"

using namespace rp::runtime;

bool rp::runtime::glooBuiltIn() { return false; }

Expected<std::unique_ptr<Communicator>>
rp::runtime::createGlooCommunicator(const Rendezvous &, const CommTimeouts &) {
  return unsupported("this rp-run was built without Gloo, so it cannot join "
                     "a job of several processes on the host backend; "
                     "install libgloo-dev (scripts/setup.sh) and rebuild");
}
