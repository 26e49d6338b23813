//===- Executor.cpp - running a plan's forward on the host ----------------===//

#include "rp/runtime/Executor.h"
#include "rp/runtime/Half.h"
#include "rp/runtime/host/Gradients.h"
#include "rp/runtime/host/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>

using namespace rp::runtime;
using namespace rp::runtime::host;

/// Kernels read 64-byte aligned data: vector loads, and no false sharing
/// between buffers written by different workers.
static constexpr size_t kAlignment = 64;

HostForward::~HostForward() {
  for (uint8_t *p : storage)
    std::free(p);
}

Expected<std::unique_ptr<HostForward>>
HostForward::create(const Plan &plan) {
  std::unique_ptr<HostForward> fwd(new HostForward(plan));
  fwd->storage.resize(plan.buffers.size(), nullptr);
  fwd->inputSet.assign(plan.inputs.size(), false);
  std::vector<std::ifstream> files(plan.weightFiles.size());
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc &b = plan.buffers[i];
    size_t bytes = (b.bytes() + kAlignment - 1) / kAlignment * kAlignment;
    uint8_t *p = static_cast<uint8_t *>(
        std::aligned_alloc(kAlignment, bytes ? bytes : kAlignment));
    if (!p)
      return resourceExhausted("cannot allocate " + std::to_string(bytes) +
                               " bytes for buffer '" + b.name + "'");
    fwd->storage[i] = p;
    if (!b.constant.empty()) {
      std::memcpy(p, b.constant.data(), b.constant.size());
    } else if (b.weight && !b.weight->stored) {
      // Filled by initParameters(), from the run's seed.
      std::memset(p, 0, b.bytes());
    } else if (b.weight) {
      std::ifstream &f = files[b.weight->file];
      const WeightFileDesc &wf = plan.weightFiles[b.weight->file];
      if (!f.is_open())
        f.open(wf.resolved, std::ios::binary);
      f.seekg(static_cast<std::streamoff>(b.weight->offset));
      f.read(reinterpret_cast<char *>(p), b.bytes());
      if (!f)
        return notFound("cannot read parameter '" + b.weight->param +
                        "' from '" + wf.resolved + "'");
    } else {
      std::memset(p, 0, b.bytes());
    }
  }
  return fwd;
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
      ThreadPool inline_(1);
      if (Status s = cast(inline_, src, buffer(i)); s.failed())
        return s;
    }
    if (!found)
      return invalidArgument("--init-weights: the plan has no parameter '" +
                             name + "'");
  }
  return Status::ok();
}

TensorRef HostForward::buffer(uint32_t index) const {
  const BufferDesc &b = plan.buffers[index];
  return TensorRef{storage[index], b.dtype, b.shape};
}

TensorRef HostForward::output(size_t i) const {
  return buffer(plan.outputs[i].buffer);
}

Status HostForward::setInput(const std::string &name, const NpyArray &array) {
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
    TensorRef dst = buffer(plan.inputs[i].buffer);
    bool ints = !isFloat(src.dtype) && !isFloat(dst.dtype) &&
                src.dtype != DType::i1 && dst.dtype != DType::i1;
    bool floats = isFloat(src.dtype) && isFloat(dst.dtype);
    if (src.dtype != dst.dtype && !ints && !floats)
      return invalidArgument("input '" + name + "' holds " +
                             dtypeName(src.dtype) + " data, but the plan takes " +
                             dtypeName(dst.dtype));
    ThreadPool inline_(1);
    if (Status s = cast(inline_, src, dst); s.failed())
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
  return invalidArgument("the plan has no input '" + name + "' (inputs: " +
                         names + ")");
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
        double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
        TensorRef one{&z, DType::f64, {1}};
        TensorRef dst{static_cast<uint8_t *>(t.data) + k * dtypeSize(t.dtype),
                      t.dtype, {1}};
        ThreadPool inline_(1);
        if (Status s = cast(inline_, one, dst); s.failed())
          return s;
      }
      }
    }
    inputSet[i] = true;
  }
  return Status::ok();
}

static BinaryKind binaryKind(OpKind op) {
  switch (op) {
  case OpKind::sub:
    return BinaryKind::sub;
  case OpKind::mul:
    return BinaryKind::mul;
  case OpKind::div:
    return BinaryKind::div;
  case OpKind::pow:
    return BinaryKind::pow;
  case OpKind::max:
    return BinaryKind::max;
  case OpKind::min:
    return BinaryKind::min;
  default:
    return BinaryKind::add;
  }
}

static UnaryKind unaryKind(OpKind op) {
  switch (op) {
  case OpKind::exp:
    return UnaryKind::exp;
  case OpKind::log:
    return UnaryKind::log;
  case OpKind::sqrt:
    return UnaryKind::sqrt;
  case OpKind::rsqrt:
    return UnaryKind::rsqrt;
  case OpKind::tanh:
    return UnaryKind::tanh;
  case OpKind::erf:
    return UnaryKind::erf;
  case OpKind::sigmoid:
    return UnaryKind::sigmoid;
  case OpKind::silu:
    return UnaryKind::silu;
  case OpKind::relu:
    return UnaryKind::relu;
  default:
    return UnaryKind::neg;
  }
}

/// The value of a one-element float tensor (a loss scale).
static double scalarValue(const TensorRef &t) {
  switch (t.dtype) {
  case DType::f64:
    return t.as<double>()[0];
  case DType::f32:
    return t.as<float>()[0];
  case DType::bf16:
    return static_cast<float>(t.as<bf16>()[0]);
  case DType::f16:
    return static_cast<float>(t.as<f16>()[0]);
  default:
    return 0.0;
  }
}

/// rp.unary_grad's kinds (UnaryGradKind) as the kernels name them.
static UnaryKind unaryGradKind(int64_t kind) {
  static const UnaryKind kinds[] = {
      UnaryKind::exp,     UnaryKind::log,  UnaryKind::sqrt, UnaryKind::rsqrt,
      UnaryKind::tanh,    UnaryKind::erf,  UnaryKind::sigmoid,
      UnaryKind::silu,    UnaryKind::relu, UnaryKind::gelu,
      UnaryKind::geluTanh};
  return kinds[kind];
}

Status HostForward::runCall(ThreadPool &pool, const ProgramDesc &program,
                            size_t index) {
  const KernelCallDesc &c = program.calls[index];
  std::vector<TensorRef> in;
  for (uint32_t b : c.inputs)
    in.push_back(buffer(b));
  std::vector<TensorRef> outs;
  for (uint32_t b : c.outputs)
    outs.push_back(buffer(b));
  TensorRef out = outs[0];
  const std::vector<int64_t> &a = c.ints;
  auto optional = [&](bool present, size_t i) {
    return present ? std::optional<TensorRef>(in[i]) : std::nullopt;
  };
  switch (c.op) {
  case OpKind::add: case OpKind::sub: case OpKind::mul: case OpKind::div:
  case OpKind::pow: case OpKind::max: case OpKind::min:
    return binary(pool, binaryKind(c.op), in[0], in[1], out);
  case OpKind::cmp:
    return compare(pool, static_cast<CmpKind>(a[0]), in[0], in[1], out);
  case OpKind::where:
    return where(pool, in[0], in[1], in[2], out);
  case OpKind::gelu:
    return unary(pool, a[0] ? UnaryKind::geluTanh : UnaryKind::gelu, in[0],
                 out);
  case OpKind::neg: case OpKind::exp: case OpKind::log: case OpKind::sqrt:
  case OpKind::rsqrt: case OpKind::tanh: case OpKind::erf:
  case OpKind::sigmoid: case OpKind::silu: case OpKind::relu:
    return unary(pool, unaryKind(c.op), in[0], out);
  case OpKind::cast:
    return cast(pool, in[0], out);
  case OpKind::reshape:
    return copy(pool, in[0], out);
  case OpKind::transpose:
    return transpose(pool, in[0], a, out);
  case OpKind::slice: {
    size_t rank = out.shape.size();
    return slice(pool, in[0], {a.begin(), a.begin() + rank},
                 {a.begin() + rank, a.end()}, out);
  }
  case OpKind::concat:
    return concat(pool, in, a[0], out);
  case OpKind::broadcast:
    return broadcast(pool, in[0], out);
  case OpKind::gather:
    return gather(pool, in[0], in[1], a[0], out);
  case OpKind::matmul:
    return matmul(pool, in[0], in[1], a[0] != 0, a[1] != 0, out);
  case OpKind::reduce:
    return reduce(pool, static_cast<ReduceKind>(a[0]), in[0],
                  {a.begin() + 2, a.end()}, a[1] != 0, out);
  case OpKind::softmax:
  case OpKind::log_softmax:
    return softmax(pool, in[0], a[0], c.op == OpKind::log_softmax, out);
  case OpKind::layer_norm:
    return layerNorm(pool, in[0], optional(a[1], 1),
                     optional(a[2], a[1] ? 2 : 1), a[0], c.floats[0], out);
  case OpKind::rms_norm:
    return rmsNorm(pool, in[0], optional(a[1], 1), a[0], c.floats[0], out);
  case OpKind::attention:
    return attention(pool, in[0], in[1], in[2], optional(a[1], 3), a[0] != 0,
                     c.floats[0], out);
  case OpKind::cross_entropy:
    return crossEntropy(pool, in[0], in[1], a[0], outs[0], outs[1]);
  case OpKind::cross_entropy_grad:
    return crossEntropyGrad(pool, in[0], in[1], a[0], scalarValue(in[2]), out);
  case OpKind::unary_grad:
    if (a[0] < 0 || a[0] > 10)
      return invalidArgument("unknown unary gradient kind");
    return unaryGrad(pool, unaryGradKind(a[0]), in[0], in[1], out);
  case OpKind::softmax_grad:
    return softmaxGrad(pool, in[0], in[1], a[0], a[1] != 0, out);
  case OpKind::norm_grad: {
    bool hasScale = a[1] != 0, withBias = a[2] != 0;
    auto scale = optional(hasScale, 1);
    const TensorRef &dy = in.back();
    std::optional<TensorRef> dscale, dbias;
    if (hasScale)
      dscale = outs[1];
    if (withBias)
      dbias = outs[hasScale ? 2 : 1];
    if (a[3])
      return rmsNormGrad(pool, in[0], scale, a[0], c.floats[0], dy, out,
                         dscale);
    return layerNormGrad(pool, in[0], scale, a[0], c.floats[0], dy, out,
                         dscale, dbias);
  }
  case OpKind::attention_grad:
    return attentionGrad(pool, in[0], in[1], in[2], optional(a[1], 3),
                         a[0] != 0, c.floats[0], in.back(), outs[0], outs[1],
                         outs[2]);
  case OpKind::gather_grad:
    return gatherGrad(pool, in[0], a[0], in[1], out);
  case OpKind::slice_grad: {
    size_t rank = out.shape.size();
    return sliceGrad(pool, in[0], {a.begin(), a.begin() + rank},
                     {a.begin() + rank, a.end()}, out);
  }
  case OpKind::extremum_grad:
    return reduceExtremumGrad(pool, static_cast<ReduceKind>(a[0]) == ReduceKind::max,
                              in[0], {a.begin() + 2, a.end()}, a[1] != 0,
                              in[1], out);
  }
  return internalError("unknown kernel");
}

Status HostForward::runProgram(ThreadPool &pool, uint32_t index) {
  const ProgramDesc &program = plan.programs[index];
  for (size_t i = 0; i < program.calls.size(); ++i) {
    Status s = runCall(pool, program, i);
    if (s.failed()) {
      const KernelCallDesc &c = program.calls[i];
      return Status(s.getCode(),
                    "program '" + program.name + "', call #" +
                        std::to_string(i) + " (" + opKindName(c.op) +
                        (c.loc.empty() ? "" : " at " + c.loc) +
                        "): " + s.getMessage());
    }
  }
  return Status::ok();
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
