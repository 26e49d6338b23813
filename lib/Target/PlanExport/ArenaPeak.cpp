//===- ArenaPeak.cpp - the planned peak covers the runtime's arenas -------===//
//
// The memory model of rp-plan-memory counts a stage's bytes by command
// (weights, input, output and work of each); the plan names every tensor
// as a buffer of its own, and the runtime packs those buffers into arenas
// with the contract's first fit (rp/contract/ArenaPacking.h). A buffer
// with several values in one step (a weight's gradient each microbatch
// writes again, HRM's layers run several times) is not one interval of
// time, and a first fit of such buffers can take more than any count of
// bytes live at once: roformer's took 1,887,488 B against a model of
// 1,803,288. The exporter packs the plan it has just written as the
// runtime will and raises each device's planned peak to the arena where
// the arena is over it by more than its alignment padding (the slack the
// runtime allows), so the runtime's arenas always fit the plan. With the
// devices renamed pass by pass, the arena is the runtime's rotating one
// (arena::renamedArenaBytes).
//
//===----------------------------------------------------------------------===//

#include "StagedExporter.h"
#include "rp/contract/ArenaPacking.h"

using namespace mlir;
using namespace mlir::rp;
namespace arena = ::rp::arena;

template <typename T>
static std::vector<uint32_t> indices(const flatbuffers::Vector<T> *v) {
  return v ? std::vector<uint32_t>(v->begin(), v->end())
           : std::vector<uint32_t>();
}

/// What the runtime's loader gives packing (runtime/lib/plan/DeviceMemory.cpp
/// shapeOf), read from the plan file.
static arena::PlanShape shapeOf(const pf::Plan &plan) {
  arena::PlanShape s;
  s.devices = plan.devices();
  s.events = plan.events();
  s.staged = plan.staged();
  s.prologue = plan.prologue();
  s.epilogue = plan.epilogue();
  if (const auto *buffers = plan.buffers())
    for (const pf::Buffer *b : *buffers) {
      uint64_t n = 1;
      if (b->shape())
        for (int64_t d : *b->shape())
          n *= uint64_t(d);
      bool keeps = b->weight() || (b->constant() && b->constant()->size());
      s.buffers.push_back({b->device(), n * planDTypeBytes(b->dtype()), keeps});
    }
  for (const auto *bindings : {plan.inputs(), plan.outputs()})
    if (bindings)
      for (const pf::Binding *b : *bindings)
        if (b->buffer() < s.buffers.size())
          s.buffers[b->buffer()].keeps = true;
  if (const auto *programs = plan.programs())
    for (const pf::Program *p : *programs) {
      arena::Program &q = s.programs.emplace_back();
      if (p->calls())
        for (const pf::KernelCall *c : *p->calls())
          q.calls.push_back({indices(c->inputs()), indices(c->outputs())});
    }
  if (const auto *jobs = plan.jobs())
    for (const pf::Job *j : *jobs) {
      arena::Job &k = s.jobs.emplace_back();
      k.run = j->kind() == pf::JobKind::run;
      k.program = j->program();
      k.device = j->device();
      k.queue = uint32_t(j->queue());
      k.waits = indices(j->waits());
      k.records = indices(j->records());
      if (j->copies())
        for (const pf::Copy *c : *j->copies())
          k.copies.push_back({c->src(), c->dst(), c->dst_offset(), c->bytes()});
    }
  return s;
}

std::vector<int64_t>
mlir::rp::peaksCoveringArenas(const std::vector<uint8_t> &bytes,
                              ArrayRef<int64_t> passPeaks, bool renamed) {
  std::vector<int64_t> peaks(passPeaks.begin(), passPeaks.end());
  arena::PlanShape shape = shapeOf(*pf::GetPlan(bytes.data()));
  arena::Layout layout = arena::pack(shape);
  // Renamed devices each hold every device's constants (HRM's rotary
  // tables on 4 devices took 2,816 B a copy over the model's peak), which
  // the memory model counts on their own device only.
  uint64_t everywhere = renamed && shape.devices > 1
                            ? arena::renamedArenaBytes(shape, layout)
                            : 0;
  for (size_t d = 0; d < peaks.size() && d < layout.arenaBytes.size(); ++d) {
    uint64_t arena = everywhere ? everywhere : layout.arenaBytes[d];
    if (arena > uint64_t(peaks[d]) + layout.paddingBytes[d])
      peaks[d] = int64_t(arena);
  }
  return peaks;
}
