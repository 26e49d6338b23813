//===- TrainOutcome.h - what a test's training run leaves ------*- C++ -*-===//
//
// The pipeline tests compare runs bitwise by what they leave: every step's
// loss as rp-run prints it and the final checkpoint's bytes.
//
//===----------------------------------------------------------------------===//

#ifndef RP_UNITTESTS_PIPELINE_TRAINOUTCOME_H
#define RP_UNITTESTS_PIPELINE_TRAINOUTCOME_H

#include "rp/runtime/Trainer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace rp::test {

struct Outcome {
  std::vector<std::string> losses; ///< printed as rp-run prints them
  std::string weights;             ///< the final checkpoint's bytes
};

/// Trains `plan` on `fwd` with `options` (whose `save` names the
/// checkpoint folder) into `o`: the losses and the saved weights.
inline void trainInto(Outcome &o, const runtime::Plan &plan,
                      runtime::HostForward &fwd, runtime::ThreadPool &pool,
                      const runtime::TrainOptions &options) {
  runtime::Status s =
      runtime::train(plan, fwd, pool, options, [&](unsigned, double loss) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.9g", loss);
        o.losses.emplace_back(text);
      });
  EXPECT_FALSE(s.failed()) << s.getMessage();
  std::ifstream in(options.save + "/weights.safetensors", std::ios::binary);
  o.weights.assign(std::istreambuf_iterator<char>(in), {});
  EXPECT_FALSE(o.weights.empty());
}

} // namespace rp::test

#endif // RP_UNITTESTS_PIPELINE_TRAINOUTCOME_H
