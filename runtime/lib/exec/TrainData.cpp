//===- TrainData.cpp - the trainer's global batches -----------------------===//
//
// The inputs of a training run: --input/--labels arrays checked against the
// plan's global batch, synthetic batches from --seed, and the --data token
// stream.
//
//===----------------------------------------------------------------------===//

#include "TrainerParts.h"
#include "rp/contract/Files.h"
#include "rp/contract/PlanFormat.h"
#include "rp/runtime/FileIO.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include <cmath>
#include <random>

using namespace rp::runtime;

namespace rp::runtime::detail {

/// Microbatch `m` of a global-batch array: rows [m*rows, (m+1)*rows).
NpyArray slice(const NpyArray &global, unsigned m, unsigned count) {
  NpyArray part;
  part.dtype = global.dtype;
  part.shape = global.shape;
  part.shape[0] /= count;
  size_t bytes = numElements(part.shape) * dtypeSize(part.dtype);
  part.data.assign(global.data.begin() + m * bytes,
                   global.data.begin() + (m + 1) * bytes);
  return part;
}

/// The shape of input `in`'s global batch: a staged plan binds the global
/// batch itself, an unstaged one a microbatch.
/// With `accumulate` K, a step takes K such batches (K passes).
Shape globalShape(const Plan &plan, const BindingDesc &in,
                  unsigned accumulate) {
  Shape shape = plan.buffers[in.buffer].shape;
  if (!shape.empty())
    shape[0] *= (plan.staged ? 1 : plan.microbatches) * accumulate;
  return shape;
}

/// A synthetic global batch for `in`: ids below the binding's limit, or
/// N(0, 1) floats, from the seed.
Expected<NpyArray> synthetic(const Plan &plan, const BindingDesc &in,
                             uint64_t seed, unsigned accumulate) {
  const BufferDesc &b = plan.buffers[in.buffer];
  NpyArray a;
  a.dtype = b.dtype;
  a.shape = globalShape(plan, in, accumulate);
  a.data.resize(numElements(a.shape) * dtypeSize(a.dtype));
  std::mt19937_64 rng(seed ^ std::hash<std::string>()(in.name));
  // Each token's document (rp.finetune's graphs): zeros, one document a
  // row, unless --input or --dataset gives them.
  if (in.name == "segment_ids" && a.dtype == DType::i64)
    return a;
  if (a.dtype == DType::i64 || a.dtype == DType::i32) {
    if (in.limit <= 0)
      return invalidArgument("input '" + in.name +
                             "' has no known id range for synthetic data; "
                             "give it with --input or --labels");
    for (int64_t i = 0; i < numElements(a.shape); ++i) {
      int64_t id = static_cast<int64_t>(rng() % uint64_t(in.limit));
      if (a.dtype == DType::i64)
        reinterpret_cast<int64_t *>(a.data.data())[i] = id;
      else
        reinterpret_cast<int32_t *>(a.data.data())[i] = int32_t(id);
    }
    return a;
  }
  if (a.dtype != DType::f32)
    return invalidArgument("synthetic data for '" + in.name +
                           "' is f32 or ids only; give it with --input");
  for (int64_t i = 0; i < numElements(a.shape); ++i) {
    double u1 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
    double u2 = (double(rng() >> 11) + 0.5) / double(1ull << 53);
    reinterpret_cast<float *>(a.data.data())[i] = static_cast<float>(
        std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return a;
}

TokenStream::File::~File() {
  if (fd >= 0)
    ::close(fd);
}

Expected<TokenStream> TokenStream::open(const std::string &path, bool wide) {
  auto file = std::make_shared<File>();
  file->path = path;
  uint64_t size = 0;
  if (rp::files::FileError e =
          rp::files::openInput(path, "data file", UINT64_MAX, file->fd, size))
    return e.code == ENOENT ? notFound(e.message) : invalidArgument(e.message);
  size_t width = wide ? 4 : 2;
  if (size % width)
    return invalidArgument("data file '" + path + "' holds " +
                           std::to_string(size) +
                           " bytes, not a whole "
                           "number of " +
                           (wide ? "uint32" : "uint16") + " tokens");
  TokenStream s;
  s.file = std::move(file);
  s.count = size / width;
  s.width = unsigned(width);
  return s;
}

Status TokenStream::readWindow(uint64_t first,
                               std::vector<uint32_t> &window) const {
  std::vector<unsigned char> bytes(window.size() * width);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(file->fd, bytes.data() + done, bytes.size() - done,
                        off_t(first * width + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return invalidArgument(
          "cannot read data file '" + file->path + "': " +
          (n < 0 ? std::strerror(errno) : "it shrank while it was read"));
    done += size_t(n);
  }
  for (size_t i = 0; i < window.size(); ++i) {
    uint32_t v = 0;
    for (size_t b = 0; b < width; ++b)
      v |= uint32_t(bytes[i * width + b]) << (8 * b);
    window[i] = v;
  }
  return Status::ok();
}

Status TokenStream::next(NpyArray &tokensOut, NpyArray &labelsOut,
                         int64_t limit) {
  if (isDataset)
    return nextRows(tokensOut, labelsOut, limit);
  int64_t rows = tokensOut.shape[0], seq = tokensOut.shape[1];
  if (count < static_cast<uint64_t>(seq) + 1)
    return invalidArgument("the data file holds " + std::to_string(count) +
                           " tokens, fewer than one sequence of " +
                           std::to_string(seq + 1));
  auto *t = reinterpret_cast<int64_t *>(tokensOut.data.data());
  auto *l = reinterpret_cast<int64_t *>(labelsOut.data.data());
  std::vector<uint32_t> window(size_t(seq) + 1);
  // Every rank walks the whole global batch (world x rows windows) and
  // reads only its own rows, so the ranks' slices are those of one
  // process reading the global batch, and the position is the same on all.
  for (int64_t g = 0; g < rows * world; ++g) {
    if (position + seq + 1 > count)
      position = 0;
    int64_t r = g - int64_t(rank) * rows;
    if (r < 0 || r >= rows) {
      position += seq;
      continue;
    }
    if (Status st = readWindow(position, window); st.failed())
      return st;
    for (int64_t k = 0; k < seq; ++k) {
      uint32_t a = window[k], b = window[k + 1];
      if (limit > 0 && (a >= uint64_t(limit) || b >= uint64_t(limit)))
        return invalidArgument("token " + std::to_string(std::max(a, b)) +
                               " of the data file is outside the model's "
                               "vocabulary of " +
                               std::to_string(limit));
      t[r * seq + k] = a;
      l[r * seq + k] = b;
    }
    position += seq;
  }
  return Status::ok();
}

void fillDropoutKey(TrainInputs &in, const TrainOptions &options,
                    unsigned step) {
  if (!in.dropoutKey)
    return;
  NpyArray &key = in.global[::rp::plan::kDropoutKeyInput];
  int64_t rows = key.shape[0];
  // This rank's rows are its slice of the global batch (rank order), so a
  // microbatch's index is the same on any number of ranks and devices.
  int64_t rank = options.comm ? options.comm->rank() : 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t row[4] = {int64_t(options.seed), int64_t(step), rank * rows + r,
                      options.dropout ? 1 : 0};
    std::memcpy(key.data.data() + r * sizeof(row), row, sizeof(row));
  }
}

Status loadTrainInputs(const Plan &plan, const TrainOptions &options,
                       TrainInputs &out) {
  unsigned M = plan.microbatches;
  unsigned K = options.accumulate;
  // Several processes: the arrays hold the global batch of all ranks, W
  // contiguous slices in rank order; this rank keeps its own.
  unsigned W = options.comm ? unsigned(options.comm->size()) : 1;
  unsigned rank = options.comm ? unsigned(options.comm->rank()) : 0;
  std::map<std::string, NpyArray> &global = out.global;
  const BindingDesc *&labels = out.labels, *&scale = out.scale;
  std::optional<TokenStream> &stream = out.stream;
  std::string &tokenInput = out.tokenInput;
  int64_t &tokenLimit = out.tokenLimit;
  // Global batches of every input but the loss scale.
  for (const BindingDesc &in : plan.inputs) {
    if (in.name == "loss_scale") {
      scale = &in;
      continue;
    }
    if (in.name == ::rp::plan::kDropoutKeyInput) {
      // The masks follow --seed and the step on every device count; a key
      // given by hand would be overwritten each step, so it is refused.
      if (options.inputs.count(in.name))
        return invalidArgument(
            "--input " + in.name +
            ": the plan's LoRA dropout key is rp-run's own, written each "
            "step from --seed and the step; give --seed N to change the "
            "masks, or --no-dropout to run without them");
      NpyArray key;
      key.dtype = DType::i64;
      key.shape = globalShape(plan, in, K);
      if (plan.buffers[in.buffer].dtype != DType::i64 ||
          key.shape.size() != 2 || key.shape[1] != 4 ||
          key.shape[0] != int64_t(M) * int64_t(K))
        return invalidFormat("the plan's dropout_key input is " +
                             describeShape(key.shape) +
                             "; it should be one i64 row of 4 per microbatch");
      key.data.assign(numElements(key.shape) * 8, 0);
      out.dropoutKey = true;
      global[in.name] = std::move(key);
      continue;
    }
    if (in.name == "labels")
      labels = &in;
    auto it = options.inputs.find(in.name);
    NpyArray a;
    if (it != options.inputs.end()) {
      a = it->second;
    } else {
      auto s = synthetic(plan, in, options.seed, K * W);
      if (!s)
        return s.getStatus();
      a = std::move(*s);
    }
    Shape whole = globalShape(plan, in, K);
    Shape mb = whole;
    if (!whole.empty())
      whole[0] *= W;
    if (!mb.empty()) {
      // A staged plan's copies take each microbatch's part of the global
      // batch; with token slices (docs/token-slices.md) that is columns of
      // whole sequences, so M need not divide its rows.
      if (mb[0] % M && !plan.staged)
        return invalidFormat("input '" + in.name + "' binds a global batch " +
                             describeShape(whole) + " that " +
                             std::to_string(M) + " microbatches do not divide");
      if (mb[0] % M == 0)
        mb[0] /= M;
    }
    if (!mb.empty() && K > 1)
      mb[0] /= K;
    if (a.shape.empty() || a.shape != whole)
      return invalidArgument(
          "input '" + in.name + "' has shape " + describeShape(a.shape) +
          "; the plan takes " + std::to_string(M * K * W) +
          " microbatches of " + describeShape(mb) +
          " (dimension 0 is the global batch" +
          (K > 1 ? ", " + std::to_string(K) + " passes of " +
                       std::to_string(M) + " microbatches per step"
                 : std::string()) +
          (W > 1 ? ", " + std::to_string(W) + " ranks' slices in rank order"
                 : std::string()) +
          ")");
    if (W > 1 && !whole.empty()) {
      if (&in == labels)
        out.allLabels = a;
      a = slice(a, rank, W);
    }
    global[in.name] = std::move(a);
  }
  if (!scale)
    return invalidArgument("the plan has no loss_scale input; it is not a "
                           "training plan");
  // --data: the token input and the labels come from the stream, a new
  // global batch every step.
  if (!options.data.empty() && !options.dataset.empty())
    return invalidArgument("--data and --dataset exclude each other");
  if (!options.data.empty() || !options.dataset.empty()) {
    if (!labels)
      return invalidArgument(
          "--data and --dataset need a cross-entropy training plan "
          "(one with a labels input)");
    for (const BindingDesc &in : plan.inputs) {
      const BufferDesc &b = plan.buffers[in.buffer];
      // The dropout key is the trainer's own (fillDropoutKey).
      if (&in == labels || &in == scale ||
          in.name == ::rp::plan::kDropoutKeyInput)
        continue;
      // A packed model's document of each token (rp.finetune traces it):
      // the dataset's segments, -1 on padding.
      // (--data's windows are one document each: zeros.)
      if (in.name == "segment_ids" && b.dtype == DType::i64 &&
          b.shape.size() == 2) {
        if (!options.dataset.empty())
          out.segmentInput = in.name;
        continue;
      }
      if (b.dtype != DType::i64 || b.shape.size() != 2 || !tokenInput.empty())
        return invalidArgument(
            "--data and --dataset feed a model whose only other input "
            "is i64 token ids [batch, seq] (and, with --dataset, "
            "segment_ids); '" +
            in.name + "' is " + dtypeName(b.dtype) + describeShape(b.shape));
      tokenInput = in.name;
    }
    auto s = options.dataset.empty()
                 ? TokenStream::open(options.data, options.data32)
                 : TokenStream::openDataset(options.dataset, options.shuffle,
                                            options.shuffleSeed);
    if (!s)
      return s.getStatus();
    stream = std::move(*s);
    stream->rank = rank;
    stream->world = W;
  }
  for (const BindingDesc &in : plan.inputs)
    if (in.name == tokenInput)
      tokenLimit = in.limit;
  return Status::ok();
}

} // namespace rp::runtime::detail
