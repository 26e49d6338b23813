//===- TrainCheckpoint.cpp - the trainer's checkpoints --------------------===//
//
// Saves and loads the trainer's parameters (master weights, compute weights,
// optimizer state) as a checkpoint folder (Checkpoint.h).
//
//===----------------------------------------------------------------------===//

#include "TrainerParts.h"
#include "rp/runtime/FileIO.h"
#include "rp/runtime/Safetensors.h"

#include <cmath>
#include <cstring>

using namespace rp::runtime;

namespace rp::runtime::detail {

/// Writes a checkpoint folder atomically (Checkpoint.h).
Status saveCheckpoint(const std::string &dir, const std::vector<Param> &params,
                      const HostForward &fwd, const CheckpointState &state) {
  std::vector<NamedTensor> master, compute, opt;
  for (const Param &p : params) {
    TensorRef live = fwd.buffer(p.buffer);
    master.push_back({p.name, TensorRef{const_cast<float *>(p.master.data()),
                                        DType::f32, live.shape}});
    // The weights the next step computes with (W_k in async mode).
    compute.push_back({p.name, live});
    opt.push_back(
        {p.name + ".state0", TensorRef{const_cast<float *>(p.state0.data()),
                                       DType::f32, live.shape}});
    opt.push_back(
        {p.name + ".state1", TensorRef{const_cast<float *>(p.state1.data()),
                                       DType::f32, live.shape}});
  }
  return saveCheckpointFolder(dir,
                              {{"weights.safetensors", std::move(master)},
                               {"compute.safetensors", std::move(compute)},
                               {"optimizer.safetensors", std::move(opt)}},
                              state);
}

/// Loads a checkpoint into the parameters' master weights, optimizer state
/// and the plan's (compute) weights; returns the steps done.
Expected<CheckpointState> loadCheckpoint(const std::string &dir,
                                         std::vector<Param> &params,
                                         HostForward &fwd,
                                         bool allowNonfinite) {
  Expected<std::string> folder = findCheckpoint(dir);
  if (!folder)
    return folder.getStatus();
  Expected<CheckpointState> state = readCheckpointState(*folder);
  if (!state)
    return state.getStatus();
  auto master = readSafetensors(*folder + "/weights.safetensors");
  auto compute = readSafetensors(*folder + "/compute.safetensors");
  auto opt = readSafetensors(*folder + "/optimizer.safetensors");
  for (auto *f : {&master, &compute, &opt})
    if (!*f)
      return f->getStatus();
  // A checkpoint of NaN weights, or of AdamW second moments that are NaN or
  // negative (whose square root is NaN), would resume into NaN losses: a
  // damaged or hand-edited file is refused unless non-finite values are
  // what the user wants (--allow-nonfinite).
  if (!allowNonfinite) {
    const std::pair<SafetensorsFile *, const char *> files[] = {
        {&*master, "weights.safetensors"},
        {&*compute, "compute.safetensors"},
        {&*opt, "optimizer.safetensors"}};
    for (auto [file, what] : files)
      for (const auto &[name, entry] : file->tensors) {
        bool moment = file == &*opt;
        bool second = moment && !state->sgd && name.size() > 7 &&
                      name.compare(name.size() - 7, 7, ".state1") == 0;
        std::string why = firstBadValue(
            entry, moment ? HUGE_VAL : kMaxWeightMagnitude, second);
        if (!why.empty())
          return invalidArgument(
              "checkpoint '" + dir + "': " + what + ": '" + name + "' " + why +
              (second ? " (AdamW's second moments are finite and >= 0)"
               : moment
                   ? " (optimizer state is finite)"
                   : " (weights are finite, at most 1.8e19 in magnitude)") +
              "; the checkpoint is damaged: resume from another, or give "
              "--allow-nonfinite to resume from it anyway");
      }
  }
  auto take = [&](SafetensorsFile &file, const std::string &name,
                  size_t size) -> Expected<const std::vector<uint8_t> *> {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end() || it->second.dtype != DType::f32 ||
        it->second.data.size() != size * sizeof(float))
      return invalidArgument("checkpoint '" + dir + "' has no f32 '" + name +
                             "' of " + std::to_string(size) +
                             " elements; it is from another model");
    return &it->second.data;
  };
  for (Param &p : params) {
    size_t n = p.size;
    auto m = take(*master, p.name, n), c = take(*compute, p.name, n),
         s0 = take(*opt, p.name + ".state0", n),
         s1 = take(*opt, p.name + ".state1", n);
    for (auto *e : {&m, &c, &s0, &s1})
      if (!*e)
        return e->getStatus();
    // This rank's chunk of the master weights (all of them unless sharded).
    std::memcpy(p.master.data(), (*m)->data() + p.masterBegin * sizeof(float),
                p.master.size() * sizeof(float));
    // This rank's shard of the state (all of it unless sharded).
    size_t offset = p.shardBegin * sizeof(float),
           bytes = (p.shardEnd - p.shardBegin) * sizeof(float);
    std::memcpy(p.state0.data(), (*s0)->data() + offset, bytes);
    std::memcpy(p.state1.data(), (*s1)->data() + offset, bytes);
    std::memcpy(fwd.buffer(p.buffer).data, (*c)->data(), n * sizeof(float));
  }
  return state;
}

} // namespace rp::runtime::detail
