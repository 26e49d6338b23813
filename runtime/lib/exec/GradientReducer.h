//===- GradientReducer.h - gradients summed across ranks --------*- C++ -*-===//
//
// A data-parallel step's gradients are summed across the ranks parameter by
// parameter as they land, on a thread of their own, while the pipeline goes
// on; the step's loss sum follows them. The thread takes the parameters in
// one fixed order (the order their gradients land in) and every rank issues
// the same collectives in the same order, so the sums are the same bits run
// to run (Comm.h: each element added in rank order).
//
//===----------------------------------------------------------------------===//

#ifndef RP_RUNTIME_EXEC_GRADIENTREDUCER_H
#define RP_RUNTIME_EXEC_GRADIENTREDUCER_H

#include "rp/runtime/Comm.h"
#include "rp/runtime/Trace.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace rp::runtime::detail {

class GradientReducer {
public:
  /// Sums the gradients of `order.size()` parameters, in `order`, from step
  /// `first` on.
  GradientReducer(Communicator &comm, std::vector<size_t> order, unsigned first,
                  Trace *trace);
  ~GradientReducer();

  /// Parameter i's gradient of `step` (all its passes) is at data[0..n):
  /// it is summed across the ranks in place. Any thread.
  void ready(unsigned step, size_t i, float *data, size_t n);
  /// Waits until every gradient of `step` is summed, then sums `lossSum`
  /// across the ranks. Steps finish in order.
  Status finishStep(unsigned step, double &lossSum);

private:
  struct StepState {
    std::vector<std::pair<float *, size_t>> grads;
    std::vector<char> isReady;
    bool lossPosted = false, done = false;
    double loss = 0;
    Status status;
  };
  StepState &stateOf(unsigned step); ///< holds `m`
  void run();

  Communicator &comm;
  std::vector<size_t> order;
  Trace *trace;
  unsigned next;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  std::map<unsigned, StepState> steps;
  std::thread worker;
};

} // namespace rp::runtime::detail

#endif // RP_RUNTIME_EXEC_GRADIENTREDUCER_H
