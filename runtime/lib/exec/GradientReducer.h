//===- GradientReducer.h - gradients summed across ranks --------*- C++ -*-===//
//
// A data-parallel step's gradients are summed across the ranks parameter by
// parameter as they land, on a thread of their own, while the pipeline goes
// on; the step's loss sum follows them. The thread takes the parameters in
// one fixed order (the order their gradients land in) and every rank issues
// the same collectives in the same order, so the sums are the same bits run
// to run (Comm.h: each element added in rank order). With a sharded
// optimizer (ZeRO-1) each step keeps a window after its sums for the
// gathers of its update and checkpoint, on the same thread and in one order.
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXEC_GRADIENTREDUCER_H
#define RP_RUNTIME_EXEC_GRADIENTREDUCER_H

#include "StagedTrainer.h"
#include "rp/runtime/Comm.h"
#include "rp/runtime/Trace.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace rp::runtime::detail {

/// Which consecutive items of the reducer share a collective: those of at
/// most `smallItem` elements, up to `bucket` elements in all (a latency per
/// collective saved; the bits are the same).
struct Bucketing {
  size_t smallItem = size_t(1) << 16;
  size_t bucket = size_t(1) << 18;
};

class GradientReducer {
public:
  /// Sums the items in `order` (parameters' gradients, then the epilogue's
  /// uses: numbered after the parameters), in `order`, from step `first`
  /// on. With `hold`, each step keeps a window after its loss sum
  /// for the collectives of its update and checkpoint (collective()), closed
  /// by release().
  /// Items from `firstUse` on are the epilogue's uses.
  /// ZeRO-1: in the steps `scatter` picks, a parameter's gradient (an item
  /// before `firstUse`) is reduce-scattered: only this rank's shard of it
  /// (setShard's chunk) is summed, the rest is left undefined. The
  /// epilogue's uses stay whole. `scatter` is called on the reducer's
  /// thread.
  GradientReducer(Communicator &comm, std::vector<size_t> order, unsigned first,
                  Trace *trace, bool hold = false, size_t firstUse = SIZE_MAX,
                  Bucketing bucketing = {},
                  std::function<bool(unsigned step)> scatter = nullptr);
  ~GradientReducer();

  Communicator &communicator() { return comm; }
  /// The collectives its sums issued so far (reducer's thread; read it
  /// once the steps are finished), and how many of them reduce-scattered.
  size_t sumCollectives() const { return collectives; }
  size_t scatterCollectives() const { return scatters; }

  /// Item i's value of `step` (all its passes) is at data[0..n): it is
  /// summed across the ranks in place. Any thread.
  void ready(unsigned step, size_t i, float *data, size_t n);
  /// Waits until item i of `step` is summed (the step's sums so far
  /// succeeded) or failed.
  Status waitSummed(unsigned step, size_t i);
  /// Waits until every gradient of `step` is summed, then sums `lossSum`
  /// across the ranks. Steps finish in order.
  Status finishStep(unsigned step, double &lossSum);
  /// Runs `fn` (collectives) on the reducer's thread in `step`'s window,
  /// after its loss sum and before the next step's sums, so the ranks'
  /// collectives stay in one order; returns its status. Needs `hold`.
  Status collective(unsigned step, const std::function<Status()> &fn);
  /// Closes `step`'s window: the next step's sums may start.
  void release(unsigned step);

private:
  struct Job {
    const std::function<Status()> *fn;
    Status status;
    bool done = false;
  };
  struct StepState {
    std::vector<std::pair<float *, size_t>> grads;
    std::vector<char> isReady, isSummed;
    std::vector<Job *> jobs;
    bool lossPosted = false, done = false, released = false;
    double loss = 0;
    Status status;
  };
  StepState &stateOf(unsigned step); ///< holds `m`
  /// Sums `parts` across the ranks in one collective (with `scatter`,
  /// each part's shard on this rank only).
  Status sumParts(const std::vector<std::pair<float *, size_t>> &parts,
                  bool scatter);
  void run();

  Communicator &comm;
  std::vector<size_t> order;
  size_t items = 0;
  size_t firstUse;
  Bucketing bucketing;
  std::vector<float> bucket;
  size_t collectives = 0, scatters = 0;
  std::function<bool(unsigned)> scatterStep;
  Trace *trace;
  bool hold;
  unsigned next;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::map<unsigned, StepState> steps;
  std::thread worker;
};

/// The reducer's order: the parameters by the first job that lands their
/// gradient (the order they land in), then the epilogue's `uses` (items
/// params..params+uses), then the others but those whose gradient the
/// epilogue makes from the summed uses (`fromUses`, may be empty).
std::vector<size_t>
landingOrder(const std::vector<std::vector<size_t>> &landsWith, size_t params,
             size_t uses = 0, const std::vector<bool> &fromUses = {});

/// ZeRO-1: the elements of a parameter of `n` whose optimizer state rank
/// `rank` of `world` keeps, into p.shardBegin/shardEnd: the chunk
/// Communicator::sum gives that rank (all of them for one rank).
void setShard(Param &p, size_t n, unsigned rank, unsigned world);

/// ZeRO-1: parameter `p`'s elements into `full` from every rank's shard
/// (this rank's at `mine`), in `step`'s window of the reducer.
Status gatherShards(GradientReducer &reducer, unsigned step, float *full,
                    const float *mine, const Param &p);

/// ZeRO-1: gathers every parameter's whole optimizer state (and master
/// weights, where sharded) in `step`'s window (every rank), and, where
/// `write` is wanted, runs it with the whole state standing in for the
/// shards in `params`.
Status withWholeState(GradientReducer &reducer, unsigned step,
                      std::vector<Param> &params, bool wanted,
                      const std::function<Status()> &write);

} // namespace rp::runtime::detail

#endif // RP_RUNTIME_EXEC_GRADIENTREDUCER_H
