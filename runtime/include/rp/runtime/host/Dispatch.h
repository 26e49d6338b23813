//===- Dispatch.h - a plan program on the host kernels ----------*- C++ -*-===//
//
// The one dispatch from a plan's kernel calls to the host kernel library,
// shared by HostForward (unstaged plans and the host programs of staged
// ones) and the host device's compute queues.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_HOST_DISPATCH_H
#define RP_RUNTIME_HOST_DISPATCH_H

#include "rp/runtime/Device.h"
#include "rp/runtime/Plan.h"
#include "rp/runtime/ThreadPool.h"

namespace rp::runtime::host {

/// Runs program `index` of `plan`, its kernel calls in order on `pool`,
/// with buffer b of the plan at `buffers[b]` (host-addressable memory). A
/// failure names the program, the call and its op.
Status runProgram(ThreadPool &pool, const Plan &plan, uint32_t index,
                  const BufferAddresses &buffers);
/// The same for the calls of program `index` listed in `calls`, in that
/// order.
Status runProgramCalls(ThreadPool &pool, const Plan &plan, uint32_t index,
                       const std::vector<size_t> &calls,
                       const BufferAddresses &buffers);

} // namespace rp::runtime::host

#endif // RP_RUNTIME_HOST_DISPATCH_H
