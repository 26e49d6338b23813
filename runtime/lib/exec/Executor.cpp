//===- Executor.cpp - running a plan's forward on the host ----------------===//

#include "rp/runtime/Executor.h"
#include "rp/runtime/host/Dispatch.h"
#include "rp/runtime/host/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <set>

using namespace rp::runtime;
using namespace rp::runtime::host;

HostForward::~HostForward() {
  for (unsigned slot = 0; slot < tables.size() / numDevices(); ++slot)
    for (size_t i = 0; i < plan.buffers.size(); ++i) {
      uint8_t *p = tables[slot * numDevices()][i];
      // A buffer shared by the slots is freed with slot 0's.
      if (p && plan.buffers[i].onHost() && (slot == 0 || p != tables[0][i]))
        backend->deallocateHost(p);
    }
  for (size_t a = 0; a < arenas.size(); ++a)
    if (arenas[a])
      backend->getDevice(uint32_t(a % numDevices())).deallocate(arenas[a]);
}

uint64_t HostForward::allocatedDeviceBytes() const {
  uint64_t total = 0;
  for (size_t a = 0; a < arenas.size(); ++a)
    total += arenas[a] ? arenaSizes[a] : 0;
  return total;
}

std::vector<uint64_t> HostForward::allocatedPerDevice() const {
  uint32_t G = numDevices();
  std::vector<uint64_t> bytes(G, 0);
  for (size_t a = 0; a < arenas.size(); ++a)
    bytes[a % G] += arenas[a] ? arenaSizes[a] : 0;
  return bytes;
}

/// The buffers some job's copy or some program's call writes.
static std::vector<bool> writtenByThePlan(const Plan &plan) {
  std::vector<bool> written(plan.buffers.size(), false);
  for (const JobDesc &job : plan.jobs)
    for (const CopyDesc &c : job.copies)
      written[c.dst] = true;
  for (const ProgramDesc &program : plan.programs)
    for (const KernelCallDesc &call : program.calls)
      for (uint32_t out : call.outputs)
        written[out] = true;
  return written;
}

/// A second pass in flight needs its own copy of what a pass writes, not
/// of the frozen weights (a quantized base's blobs) or constants, which no
/// job or program writes and the trainer never updates: one copy for both
/// slots, so that a continuous run holds the base once, as rp-compile's
/// host memory counts it (docs/nf4.md).
std::vector<bool> rp::runtime::hostBuffersSharedAcrossSlots(const Plan &plan) {
  std::vector<bool> written = writtenByThePlan(plan);
  // Inputs are set per slot (each pass's microbatches).
  for (const BindingDesc &in : plan.inputs)
    written[in.buffer] = true;
  std::set<std::string> trained;
  for (const BindingDesc &o : plan.outputs)
    if (o.name.rfind("grad:", 0) == 0)
      trained.insert(o.name.substr(5));
  std::vector<bool> shared(plan.buffers.size(), false);
  for (uint32_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    shared[i] =
        b.onHost() && !written[i] &&
        (!b.constant.empty() || (b.weight && !trained.count(b.weight->param)));
  }
  return shared;
}

uint64_t rp::runtime::hostBufferBytes(const Plan &plan, unsigned slots) {
  std::vector<bool> shared = hostBuffersSharedAcrossSlots(plan);
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].onHost())
      bytes += plan.buffers[i].bytes() * (shared[i] ? 1 : slots);
  return bytes;
}

Expected<std::unique_ptr<HostForward>> HostForward::create(const Plan &plan) {
  BackendOptions options;
  options.devices = plan.devices;
  Expected<std::unique_ptr<Backend>> backend = createBackend("host", options);
  if (!backend)
    return backend.getStatus();
  Expected<std::unique_ptr<HostForward>> fwd = create(plan, **backend);
  if (fwd)
    (*fwd)->ownedBackend = std::move(*backend);
  return fwd;
}

Expected<std::unique_ptr<HostForward>>
HostForward::createUnfilled(const Plan &plan, Backend &backend) {
  ForwardOptions options;
  options.fill = false;
  // Sizes only: nothing to share, and no order to compute for a big plan.
  options.shareDeviceMemory = false;
  return create(plan, backend, options);
}

Expected<std::unique_ptr<HostForward>>
HostForward::create(const Plan &plan, Backend &backend,
                    const ForwardOptions &options) {
  bool fill = options.fill;
  for (const BufferDesc &b : plan.buffers)
    if (b.device >= 0 && uint32_t(b.device) >= backend.getNumDevices())
      return invalidArgument("buffer '" + b.name + "' lives on device " +
                             std::to_string(b.device) + ", but the " +
                             backend.getName() + " backend has " +
                             std::to_string(backend.getNumDevices()) +
                             " device(s); open it with the plan's " +
                             std::to_string(plan.devices));
  if (fill && std::string(backend.getName()) == "sim")
    return invalidArgument("the sim backend has no memory to load '" +
                           plan.path +
                           "' into; time it with rp-run "
                           "--backend sim (sim::simulate)");
  std::unique_ptr<HostForward> fwd(new HostForward(plan, backend));
  if (options.shareDeviceMemory) {
    Expected<DeviceLayout> layout = planDeviceMemory(plan);
    if (!layout)
      return layout.getStatus();
    fwd->layout = std::move(*layout);
  } else {
    // Every buffer on its own: the layout of a plan whose buffers are all
    // used at once.
    Plan alone = plan;
    alone.staged = false;
    Expected<DeviceLayout> layout = planDeviceMemory(alone);
    if (!layout)
      return layout.getStatus();
    fwd->layout = std::move(*layout);
  }
  if (options.slots < 1 || options.slots > 2)
    return internalError("a plan's buffers come in 1 or 2 slots, not " +
                         std::to_string(options.slots));
  unsigned copies = options.arenaCopies ? options.arenaCopies : options.slots;
  if (copies > options.slots)
    return invalidArgument(std::to_string(copies) +
                           " copies of the device arenas for " +
                           std::to_string(options.slots) +
                           " buffer slot(s): give at most one per slot");
  uint32_t G = plan.devices;
  fwd->slots = options.slots;
  fwd->copies = copies;
  // Renaming devices puts plan device k's buffers on device (k + shift) %
  // G. Transient buffers keep their offsets (every arena is as large as the
  // largest device's packing); the others (constants) are read-only and
  // get a range of their own after them on every device, so that whichever
  // device a pass lands on holds them. A device buffer that a job writes
  // and a later step reads again is state of its device: no renaming.
  bool rotating = options.rotate && G > 1;
  std::vector<bool> written = writtenByThePlan(plan);
  uint64_t packedEnd = 0;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    if (b.onHost())
      continue;
    if (fwd->layout.transient[i]) {
      packedEnd = std::max(packedEnd, fwd->layout.offset[i] + b.bytes());
    } else if (written[i] && rotating) {
      rotating = false;
      fwd->fixedBy = b.name.empty() ? "buffer #" + std::to_string(i) : b.name;
    }
  }
  fwd->rotating = rotating;
  fwd->sharedAcrossSlots = hostBuffersSharedAcrossSlots(plan);
  auto align = [](uint64_t n) {
    return (n + DeviceLayout::kAlignment - 1) / DeviceLayout::kAlignment *
           DeviceLayout::kAlignment;
  };
  uint64_t largest = 0;
  for (uint64_t bytes : fwd->layout.arenaBytes)
    largest = std::max(largest, bytes);
  if (rotating) {
    fwd->placed = fwd->layout.offset;
    largest = align(packedEnd);
    for (uint32_t i = 0; i < plan.buffers.size(); ++i)
      if (!plan.buffers[i].onHost() && !fwd->layout.transient[i]) {
        fwd->placed[i] = largest;
        largest += align(plan.buffers[i].bytes());
      }
  }
  // Shared arenas (fewer copies than slots): slot s uses copy s % copies,
  // and the pipeline executor keeps two passes from a device at once.
  fwd->arenas.assign(size_t(copies) * G, nullptr);
  fwd->arenaSizes.assign(size_t(copies) * G, 0);
  for (unsigned slot = 0; slot < copies; ++slot)
    for (uint32_t d = 0; d < G; ++d) {
      uint64_t bytes = rotating ? largest : fwd->layout.arenaBytes[d];
      if (!bytes)
        continue;
      Device &device = backend.getDevice(d);
      Expected<void *> memory = device.allocate(bytes);
      if (!memory)
        return Status(memory.getStatus().getCode(),
                      "device " + std::to_string(d) + "'s " +
                          std::to_string(bytes) + " bytes of buffers" +
                          (slot ? " (second copy)" : "") + ": " +
                          memory.getStatus().getMessage());
      fwd->arenas[slot * G + d] = static_cast<uint8_t *>(*memory);
      fwd->arenaSizes[slot * G + d] = bytes;
      if (fill && device.isHostAccessible())
        std::memset(*memory, 0xff, bytes);
    }
  fwd->fill = fill;
  fwd->tables.assign(size_t(options.slots) * G,
                     BufferAddresses(plan.buffers.size(), nullptr));
  fwd->inputSet.assign(plan.inputs.size(), false);
  fwd->hostBytes.assign(options.slots, 0);
  std::vector<std::ifstream> files(plan.weightFiles.size());
  for (uint32_t i = 0; i < plan.buffers.size(); ++i)
    if (Status s = fwd->allocateBuffer(i, files); s.failed())
      return s;
  fwd->storage = fwd->tables[0];
  return fwd;
}

Status HostForward::allocateBuffer(uint32_t index,
                                   std::vector<std::ifstream> &files) {
  const BufferDesc &b = plan.buffers[index];
  uint32_t G = numDevices();
  for (unsigned slot = 0; slot < slots; ++slot) {
    if (b.onHost() && slot > 0 && sharedAcrossSlots[index]) {
      for (uint32_t shift = 0; shift < G; ++shift)
        tables[slot * G + shift][index] = tables[0][index];
      continue;
    }
    if (b.onHost()) {
      Expected<void *> memory = backend->allocateHost(b.bytes());
      if (!memory)
        return Status(memory.getStatus().getCode(),
                      "buffer '" + b.name +
                          "': " + memory.getStatus().getMessage());
      auto *p = static_cast<uint8_t *>(*memory);
      hostBytes[slot] += b.bytes();
      for (uint32_t shift = 0; shift < G; ++shift)
        tables[slot * G + shift][index] = p;
      if (Status s = fillBuffer(index, p, nullptr, files); s.failed())
        return s;
      continue;
    }
    unsigned copy = slot % copies;
    for (uint32_t shift = 0; shift < G; ++shift) {
      uint32_t d = (uint32_t(b.device) + (rotating ? shift : 0)) % G;
      uint8_t *p =
          arenas[copy * G + d] + (rotating ? placed : layout.offset)[index];
      tables[slot * G + shift][index] = p;
      // Without renaming every shift is the same place: fill it once. With
      // it a transient buffer keeps its NaNs, so that a read before its
      // pass writes it shows; a constant is on every device. A slot on an
      // arena copy an earlier slot filled has its contents already.
      if (copy != slot)
        continue;
      if (rotating ? !layout.transient[index] : shift == 0)
        if (Status s = fillBuffer(index, p, &backend->getDevice(d), files);
            s.failed())
          return s;
    }
  }
  return Status::ok();
}

Status HostForward::fillBuffer(uint32_t index, uint8_t *p, Device *device,
                               std::vector<std::ifstream> &files) {
  const BufferDesc &b = plan.buffers[index];
  // A shared buffer's bytes are whatever its job writes; the NaNs the arena
  // starts with catch a read before that write.
  if (!fill || (device && layout.shared[index]))
    return Status::ok();
  uint8_t *dst = p;
  // Memory the host cannot write is filled through a staging copy.
  std::vector<uint8_t> staging;
  if (device && !device->isHostAccessible()) {
    staging.resize(b.bytes());
    p = staging.data();
  }
  if (!b.constant.empty()) {
    std::memcpy(p, b.constant.data(), b.constant.size());
  } else if (b.weight &&
             (!b.weight->stored || plan.weightFiles[b.weight->file].missing)) {
    // Filled by initParameters() or randomParameters(), from a seed.
    std::memset(p, 0, b.bytes());
  } else if (b.weight) {
    std::ifstream &f = files[b.weight->file];
    const WeightFileDesc &wf = plan.weightFiles[b.weight->file];
    if (!f.is_open())
      f.open(wf.resolved, std::ios::binary);
    f.clear();
    f.seekg(static_cast<std::streamoff>(b.weight->offset));
    f.read(reinterpret_cast<char *>(p), b.bytes());
    if (!f)
      return notFound("cannot read parameter '" + b.weight->param + "' from '" +
                      wf.resolved + "'");
  } else {
    std::memset(p, 0, b.bytes());
  }
  if (staging.empty())
    return Status::ok();
  Queue &queue = device->getQueue(QueueKind::weight_h2d);
  if (Status s = queue.copy(dst, staging.data(), staging.size(),
                            CopyKind::hostToDevice);
      s.failed())
    return s;
  return queue.synchronize();
}

Status HostForward::initParameters(uint64_t seed) {
  for (uint32_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    if (!b.weight || b.weight->stored || b.weight->initBound == 0.0)
      continue;
    if (b.dtype != DType::f32)
      return unsupported("parameter '" + b.weight->param +
                         "' is initialized in f32 only");
    // Seeded per parameter name, so adding a parameter does not change the
    // others' values.
    std::mt19937_64 rng(seed ^ std::hash<std::string>()(b.weight->param));
    float *w = static_cast<float *>(static_cast<void *>(storage[i]));
    double bound = b.weight->initBound;
    for (int64_t k = 0; k < b.size(); ++k)
      w[k] = static_cast<float>(
          (double(rng() >> 11) / double(1ull << 53) * 2.0 - 1.0) * bound);
    // A device parameter on a shared arena is the same bytes in every slot.
    for (unsigned slot = 1; slot < slots; ++slot)
      if (buffer(i, slot).data != w)
        std::memcpy(buffer(i, slot).data, w, b.bytes());
  }
  return Status::ok();
}

Status HostForward::overrideParameters(const SafetensorsFile &file) {
  for (const auto &[name, entry] : file.tensors) {
    bool found = false;
    for (uint32_t i = 0; i < plan.buffers.size() && !found; ++i) {
      const BufferDesc &b = plan.buffers[i];
      if (!b.weight || b.weight->param != name)
        continue;
      found = true;
      if (entry.shape != b.shape)
        return invalidArgument("--init-weights: '" + name + "' has shape " +
                               describeShape(entry.shape) +
                               ", but the parameter is " +
                               describeShape(b.shape));
      TensorRef src{const_cast<uint8_t *>(entry.data.data()), entry.dtype,
                    entry.shape};
      if (!isFloat(src.dtype))
        return invalidArgument("--init-weights: '" + name +
                               "' is not a float tensor");
      ThreadPool serial(1);
      for (unsigned slot = 0; slot < slots; ++slot)
        if (Status s = cast(serial, src, buffer(i, slot)); s.failed())
          return s;
    }
    if (!found)
      return invalidArgument("--init-weights: the plan has no parameter '" +
                             name + "'");
  }
  return Status::ok();
}

TensorRef HostForward::buffer(uint32_t index, unsigned slot) const {
  const BufferDesc &b = plan.buffers[index];
  return TensorRef{tables[slot * numDevices()][index], b.dtype, b.shape};
}

TensorRef HostForward::output(size_t i) const {
  return buffer(plan.outputs[i].buffer);
}

Status HostForward::setInput(const std::string &name, const NpyArray &array,
                             unsigned slot) {
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (plan.inputs[i].name != name)
      continue;
    const BufferDesc &b = plan.buffers[plan.inputs[i].buffer];
    if (array.shape != b.shape)
      return invalidArgument("input '" + name + "' has shape " +
                             describeShape(array.shape) +
                             ", but the plan takes " + describeShape(b.shape));
    TensorRef src{const_cast<uint8_t *>(array.data.data()), array.dtype,
                  array.shape};
    TensorRef dst = buffer(plan.inputs[i].buffer, slot);
    bool ints = !isFloat(src.dtype) && !isFloat(dst.dtype) &&
                src.dtype != DType::i1 && dst.dtype != DType::i1;
    bool floats = isFloat(src.dtype) && isFloat(dst.dtype);
    if (src.dtype != dst.dtype && !ints && !floats)
      return invalidArgument(
          "input '" + name + "' holds " + dtypeName(src.dtype) +
          " data, but the plan takes " + dtypeName(dst.dtype));
    ThreadPool serial(1);
    if (Status s = cast(serial, src, dst); s.failed())
      return s;
    if (ints && plan.inputs[i].limit > 0) {
      for (int64_t k = 0; k < dst.size(); ++k) {
        int64_t id = dst.dtype == DType::i64 ? dst.as<int64_t>()[k]
                                             : dst.as<int32_t>()[k];
        // Labels may hold the ignore index (DESIGN.md, Loss).
        if (name == "labels" && id == -100)
          continue;
        if (id < 0 || id >= plan.inputs[i].limit)
          return invalidArgument("input '" + name + "' holds id " +
                                 std::to_string(id) + " at position " +
                                 std::to_string(k) + "; ids must lie in [0, " +
                                 std::to_string(plan.inputs[i].limit) + ")");
      }
    }
    inputSet[i] = true;
    return Status::ok();
  }
  std::string names;
  for (const BindingDesc &in : plan.inputs)
    names += (names.empty() ? "" : ", ") + in.name;
  return invalidArgument("the plan has no input '" + name +
                         "' (inputs: " + names + ")");
}

Status HostForward::setSyntheticInputs(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (inputSet[i])
      continue;
    TensorRef t = buffer(plan.inputs[i].buffer);
    int64_t limit = plan.inputs[i].limit;
    for (int64_t k = 0; k < t.size(); ++k) {
      switch (t.dtype) {
      case DType::i64:
      case DType::i32: {
        if (limit <= 0)
          return invalidArgument("input '" + plan.inputs[i].name +
                                 "' has no known id range for synthetic data; "
                                 "give it with --input " +
                                 plan.inputs[i].name + "=FILE.npy");
        int64_t id = static_cast<int64_t>(rng() % uint64_t(limit));
        if (t.dtype == DType::i64)
          t.as<int64_t>()[k] = id;
        else
          t.as<int32_t>()[k] = static_cast<int32_t>(id);
        break;
      }
      case DType::i1:
        t.as<uint8_t>()[k] = rng() & 1;
        break;
      default: {
        // Box-Muller on the raw generator: the same numbers with every
        // standard library.
        double u1 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
        double u2 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
        double z =
            std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
        TensorRef one{&z, DType::f64, {1}};
        TensorRef dst{static_cast<uint8_t *>(t.data) + k * dtypeSize(t.dtype),
                      t.dtype,
                      {1}};
        ThreadPool serial(1);
        if (Status s = cast(serial, one, dst); s.failed())
          return s;
      }
      }
    }
    inputSet[i] = true;
  }
  return Status::ok();
}

Status HostForward::runProgram(ThreadPool &pool, uint32_t index,
                               unsigned slot) {
  return host::runProgram(pool, plan, index, tables[slot * numDevices()]);
}

Status HostForward::runProgramCalls(ThreadPool &pool, uint32_t index,
                                    const std::vector<size_t> &calls,
                                    unsigned slot) {
  return host::runProgramCalls(pool, plan, index, calls,
                               tables[slot * numDevices()]);
}

Status HostForward::runJob(ThreadPool &pool, const JobDesc &job) {
  if (job.kind == JobKind::run)
    return runProgram(pool, job.program);
  // memmove: a copy within one device may move bytes inside one buffer.
  for (const CopyDesc &c : job.copies)
    std::memmove(storage[c.dst] + c.dstOffset, storage[c.src] + c.srcOffset,
                 c.bytes);
  return Status::ok();
}

Status HostForward::run(ThreadPool &pool) {
  if (plan.staged)
    return internalError("a staged plan runs with the pipeline executor, not "
                         "job by job in plan order");
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    if (!inputSet[i])
      return invalidArgument("input '" + plan.inputs[i].name +
                             "' was not given");
  for (const JobDesc &job : plan.jobs)
    if (Status s = runJob(pool, job); s.failed())
      return s;
  return Status::ok();
}
