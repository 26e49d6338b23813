//===- RunCompute.cpp - what rp-run's computing modes share to start ------===//
//
// Training and a forward run both check their flags against the plan, open
// the backend, allocate the plan's buffers once (HostForward), initialize
// the parameters and read the given inputs before their first step.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/runtime/PipelineExecutor.h"
#include "rp/runtime/RandomInit.h"
#include "rp/runtime/Safetensors.h"

#include <algorithm>
#include <thread>
#include <unistd.h>

using namespace rp::runtime;
using namespace rp::runtime::run;

int rp::runtime::run::setUpCompute(const RunOptions &o, const Plan &plan,
                                   ComputeSetup &setup) {
  // A plan of a large shape (python -m rp.shapes qwen3-32b) loads nowhere
  // but the sim: say so before allocating, not after the kernel's OOM
  // killer. Host buffers always live in this machine's memory, device
  // buffers too on the host backend.
  {
    double bytes = 0;
    for (const BufferDesc &b : plan.buffers)
      if (b.onHost() || o.backend == "host")
        bytes += double(b.bytes());
    double ram =
        double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (ram > 0 && bytes > ram)
      return fail(resourceExhausted(
          "'" + o.planPath + "' needs " +
          std::to_string(int64_t(bytes / double(1ull << 30))) +
          " GiB of host memory on the " + o.backend +
          " backend, but this machine has " +
          std::to_string(int64_t(ram / double(1ull << 30))) +
          " GiB; time it with --backend sim (it allocates nothing), or "
          "compile a smaller shape"));
  }
  BackendOptions backendOptions;
  backendOptions.devices = plan.devices;
  backendOptions.threads = o.threads;
  if (o.tf32 && o.backend != "cuda")
    return fail(invalidArgument(
        "--tf32 lets the cuda backend's f32 GEMMs round their inputs to "
        "TF32; the " +
        o.backend + " backend computes f32 products in f32"));
  // The plan's --tf32 holds where it means something: on cuda.
  backendOptions.tf32 = o.tf32 || (plan.tf32 && o.backend == "cuda");
  Expected<std::unique_ptr<Backend>> devicesOf =
      createBackend(o.backend, backendOptions);
  if (!devicesOf)
    return fail(Status(devicesOf.getStatus().getCode(),
                       "--backend " + o.backend + ": " +
                           devicesOf.getStatus().getMessage()));
  setup.backend = std::move(*devicesOf);
  if (!plan.staged && (!o.tracePath.empty() || !o.profilePath.empty()))
    return fail(invalidArgument(
        "--trace and --profile time the jobs of a staged plan; '" + o.planPath +
        "' runs its jobs in order on one device (a --forward-only or older "
        "plan): compile a training plan with rp-compile"));
  if (!o.profilePath.empty() && !isTrainingPlan(plan))
    return fail(invalidArgument("--profile needs a training plan: it times "
                                "the backward of every layer too"));
  // Before training, not after it: a typo in a folder should not cost a
  // whole run.
  for (auto [flag, path] : {std::pair{"--trace", &o.tracePath},
                            std::pair{"--profile", &o.profilePath},
                            std::pair{"--dump-outputs", &o.dumpPath},
                            std::pair{"--dump-grads", &o.dumpGrads}})
    if (Status s = checkOutputFolder(flag, *path); s.failed())
      return fail(s);
  if (plan.staged)
    setup.trace =
        std::make_unique<Trace>(plan, /*keepSteps=*/!o.tracePath.empty());
  // --profile's "ops": every kernel call timed on its device.
  if (setup.trace && !o.profilePath.empty())
    setup.trace->enableCallTimes();

  if (o.accumulate < 1 || o.accumulate > 1000000)
    return fail(invalidArgument(
        "--accumulate " + std::to_string(o.accumulate) +
        " is not a number of passes; give 1 or more (passes of " +
        std::to_string(plan.microbatches) + " microbatches per step)"));
  if (o.accumulate > 1 && !isTrainingPlan(plan))
    return fail(invalidArgument("--accumulate needs a training plan: '" +
                                o.planPath + "' computes no gradients"));
  // An option a mode would ignore is refused in that mode: a run on other
  // data than the user named, printing losses all the same, is a silent
  // wrong answer.
  const std::string &stream =
      !o.train.data.empty() ? o.train.data : o.train.dataset;
  const char *streamFlag = !o.train.data.empty() ? "--data" : "--dataset";
  if (!stream.empty() && !isTrainingPlan(plan))
    return fail(invalidArgument(
        std::string(streamFlag) + " streams training batches, but '" +
        o.planPath +
        "' is a forward plan (rp-compile --forward-only): give its inputs "
        "with --input NAME=FILE.npy, or compile a training plan"));
  if (!stream.empty() && (!o.inputs.empty() || !o.labelsPath.empty()))
    return fail(invalidArgument(
        std::string(streamFlag) + " gives every step's inputs and labels, " +
        "so --input and --labels would be ignored: give " + streamFlag +
        " or --input/--labels, not both"));
  setup.start = std::chrono::steady_clock::now();
  // A staged training plan runs continuously: the plan's passes in flight
  // (or --passes-in-flight's), each on its own slot of buffers, with the
  // devices renamed pass after pass when two are.
  if (o.passesInFlight > 2)
    return fail(invalidArgument("--passes-in-flight " +
                                std::to_string(o.passesInFlight) +
                                ": give 1 or 2 (the plan's choice: " +
                                std::to_string(passesInFlight(plan)) + ")"));
  ForwardOptions forwardOptions;
  bool continuous = setup.continuous =
      plan.staged && isTrainingPlan(plan) && !o.stepBarrier;
  unsigned slots = !continuous        ? 1
                   : o.passesInFlight ? o.passesInFlight
                                      : passesInFlight(plan);
  // Copies of the device arenas: the plan's (one shared by both passes
  // where two copies do not fit), or --arena-copies'.
  if (o.arenaCopies > 2)
    return fail(invalidArgument(
        "--arena-copies " + std::to_string(o.arenaCopies) +
        ": give 1 or 2 (the plan's choice: " +
        std::to_string(arenaCopies(plan, passesInFlight(plan))) + ")"));
  if (o.arenaCopies > slots)
    return fail(invalidArgument(
        "--arena-copies " + std::to_string(o.arenaCopies) + " with " +
        std::to_string(slots) + " pass in flight" +
        (continuous ? ""
                    : " (--step-barrier, or a plan that is not a staged "
                      "training plan)") +
        ": a copy of the device arenas serves one pass at most; give "
        "--arena-copies 1" +
        (continuous ? ", or --passes-in-flight 2" : "")));
  forwardOptions.slots = slots;
  forwardOptions.arenaCopies =
      o.arenaCopies ? o.arenaCopies : arenaCopies(plan, slots);
  forwardOptions.rotate = continuous && renamesDevices(plan, slots);
  if (Status s = checkHostMemory(o, plan, slots, isTrainingPlan(plan));
      s.failed())
    return fail(s);
  Expected<std::unique_ptr<HostForward>> fwd =
      HostForward::create(plan, *setup.backend, forwardOptions);
  if (!fwd)
    return fail(fwd.getStatus());
  setup.fwd = std::move(*fwd);
  // The arenas the layout packs must be what the compiler planned: a plan
  // whose memory model missed a buffer would not fit the device it was
  // planned for.
  // All copies together: what the device holds while the run lasts.
  if (Status s = checkAllocationWithinPlan(
          plan, setup.fwd->getLayout(), setup.fwd->allocatedPerDevice(),
          setup.fwd->getSlots(), setup.fwd->getArenaCopies(),
          setup.fwd->rotates());
      s.failed())
    return fail(s);
  uint64_t randomSeed = 0;
  std::string randomError;
  if (parseRandomInit(o.initWeights, randomSeed, randomError)) {
    if (!randomError.empty())
      return fail(invalidArgument(randomError));
    ThreadPool pool(std::max(1u, std::thread::hardware_concurrency()));
    if (Status s = setup.fwd->randomParameters(pool, randomSeed); s.failed())
      return fail(s);
  } else if (Status s = setup.fwd->initParameters(o.seed); s.failed()) {
    return fail(s);
  } else if (!o.initWeights.empty()) {
    Expected<SafetensorsFile> file = readSafetensors(o.initWeights);
    if (!file)
      return fail(file.getStatus());
    // Weights that are NaN, infinite or too large for the parameter train
    // into NaN and save a checkpoint of it with exit 0: refused unless
    // asked for.
    for (const auto &[name, entry] : file->tensors) {
      if (o.train.allowNonfinite)
        break;
      double limit = kMaxWeightMagnitude;
      for (const BufferDesc &b : plan.buffers)
        if (b.weight && b.weight->param == name)
          limit = b.dtype == DType::f16 ? 65504.0 : limit; // f16's max
      std::string why = firstBadValue(entry, limit);
      if (!why.empty()) {
        char most[32];
        std::snprintf(most, sizeof(most), "%g", limit);
        return fail(invalidArgument(
            "--init-weights '" + o.initWeights + "': '" + name + "' " + why +
            "; weights are finite and at most " + most +
            " in magnitude (give --allow-nonfinite to load them anyway)"));
      }
    }
    if (Status s = setup.fwd->overrideParameters(*file); s.failed())
      return fail(s);
  }
  std::vector<std::pair<std::string, NpyArray>> &given = setup.given;
  for (const std::string &spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(
          invalidArgument("--input takes NAME=FILE.npy, got '" + spec + "'"));
    Expected<NpyArray> array = readNpy(spec.substr(eq + 1));
    if (!array)
      return fail(array.getStatus());
    given.emplace_back(spec.substr(0, eq), std::move(*array));
  }
  if (!o.labelsPath.empty()) {
    Expected<NpyArray> array = readNpy(o.labelsPath);
    if (!array)
      return fail(array.getStatus());
    given.emplace_back("labels", std::move(*array));
  }
  // A misspelt name would otherwise leave that input synthetic.
  for (auto &[name, array] : given) {
    bool known =
        name != "loss_scale" &&
        std::any_of(plan.inputs.begin(), plan.inputs.end(),
                    [&n = name](const BindingDesc &b) { return b.name == n; });
    if (!known) {
      std::string names;
      for (const BindingDesc &b : plan.inputs)
        if (b.name != "loss_scale")
          names += (names.empty() ? "" : ", ") + b.name;
      return fail(invalidArgument(
          "the plan has no input '" + name + "' (inputs: " + names + ")" +
          (name == "labels" ? "; --labels is for training plans" : "")));
    }
  }

  return 0;
}
