//===- RunEval.cpp - rp-run --eval-dataset --------------------------------===//
//
// The eval loss inside the training process (docs/finetune.md): the run
// trains --eval-every steps at a time, each stretch ending with the
// checkpoint --save names and the next resuming it (bitwise the
// uninterrupted run, as a restarted rp-run is), and between them the eval
// dataset's rows run through the same plan at the checkpoint's master
// weights in sync mode with a learning rate of 0, a step per global batch:
// the run `rp-run --init-weights CKPT/weights.safetensors --dataset EVAL
// --lr 0 --sync` makes, without starting a process, loading the plan and
// allocating its buffers again. Its loss is the token-weighted mean of the
// steps' losses; the weights the next stretch trains are the checkpoint's,
// so nothing of the eval stays.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/Safetensors.h"

#include <filesystem>
#include <fstream>

using namespace rp::runtime;
using namespace rp::runtime::run;
namespace fs = std::filesystem;

/// The rows of a dataset file (its header, docs/finetune.md).
static Expected<uint64_t> datasetRows(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char header[24] = {};
  if (!in.read(header, sizeof(header)) || std::string(header, 8) != "RPDSET01")
    return invalidArgument("--eval-dataset: '" + path +
                           "' is not an rp dataset (no RPDSET01 header); "
                           "write it with `python -m rp data`");
  uint64_t rows = 0;
  for (int i = 7; i >= 0; --i)
    rows = rows << 8 | uint8_t(header[16 + i]);
  return rows;
}

Expected<double> rp::runtime::run::evaluate(const RunOptions &o,
                                            const Plan &plan,
                                            ComputeSetup &setup,
                                            ThreadPool &pool,
                                            const std::string &checkpoint) {
  Expected<uint64_t> rows = datasetRows(o.evalDataset);
  if (!rows)
    return rows.getStatus();
  // A step reads the global batch: every microbatch of every rank.
  uint64_t perStep = 0;
  for (const BindingDesc &in : plan.inputs)
    if (in.name == "labels" && !plan.buffers[in.buffer].shape.empty())
      perStep = uint64_t(plan.buffers[in.buffer].shape[0]) *
                (plan.staged ? 1 : plan.microbatches) *
                (o.train.comm ? o.train.comm->size() : 1);
  if (perStep == 0 || *rows == 0 || *rows % perStep)
    return invalidArgument(
        "--eval-dataset: '" + o.evalDataset + "' holds " +
        std::to_string(*rows) + " rows, not a whole number of global " +
        "batches of " + std::to_string(perStep) +
        " rows; fill it with empty rows (labels -100), as rp finetune does");
  Expected<SafetensorsFile> weights =
      readSafetensors(checkpoint + "/weights.safetensors");
  if (!weights)
    return weights.getStatus();
  if (Status s = setup.fwd->overrideParameters(*weights); s.failed())
    return s;
  // rp-run's defaults but the run's own set-up (threads, passes in flight,
  // loss scaling, the job); no clipping, schedule, shuffle or checkpoint.
  TrainOptions ev;
  ev.steps = unsigned(*rows / perStep);
  ev.sync = true;
  ev.adamw.lr = 0;
  ev.adamw.weightDecay = 0;
  ev.seed = o.seed;
  // PEFT's eval runs the model in eval mode: no LoRA dropout.
  ev.dropout = false;
  ev.dataset = o.evalDataset;
  ev.overlapOptimizer = o.train.overlapOptimizer;
  ev.continuous = o.train.continuous;
  ev.lossScaling = o.train.lossScaling;
  ev.lossScale = o.train.lossScale;
  ev.watchdogMs = o.train.watchdogMs;
  ev.comm = o.train.comm;
  int64_t count = 0;
  double weighted = 0, total = 0;
  ev.onLabelCount = [&count](unsigned, int64_t n) { count = n; };
  Status s = train(plan, *setup.fwd, pool, ev, [&](unsigned, double loss) {
    weighted += loss * double(count);
    total += double(count);
  });
  if (s.failed())
    return s;
  return weighted / total;
}

Status rp::runtime::run::copyCheckpoint(const std::string &from,
                                        const std::string &to) {
  // Whole or not at all, as a save: a copy beside it, then renamed over.
  std::error_code ec;
  std::string tmp = to + ".tmp";
  fs::remove_all(tmp, ec);
  fs::copy(from, tmp, fs::copy_options::recursive, ec);
  if (!ec)
    fs::remove_all(to, ec);
  if (!ec)
    fs::rename(tmp, to, ec);
  if (ec)
    return invalidArgument("--save-best: cannot copy '" + from + "' to '" + to +
                           "': " + ec.message());
  return Status::ok();
}
