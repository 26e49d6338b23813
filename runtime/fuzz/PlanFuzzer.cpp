//===- PlanFuzzer.cpp - libFuzzer target of the plan loader ---------------===//
//
// Loads the input as an .rpplan (through a file, as rp-run does: the loader
// resolves weight files beside it): the FlatBuffers verifier and every
// validation must refuse what they cannot use. A plan that loads must also
// describe itself (rp-run --describe) without an internal error.

#include "FuzzCheck.h"
#include "rp/runtime/Plan.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace rp::runtime;

/// Where the target writes its files: $RP_FUZZ_TMP (scripts/fuzz.sh gives
/// each run its own and removes it after), else /tmp.
static std::string fuzzFolderRoot() {
  const char *root = std::getenv("RP_FUZZ_TMP");
  return root && *root ? root : "/tmp";
}

/// A folder of this process's own with weight files of the names the seed
/// plans use (1 MiB of zeros each), so that mutated plans get past the
/// weight-file checks into the validation of their buffers and jobs.
static std::string fuzzFolder() {
  std::string dir =
      fuzzFolderRoot() + "/rp-fuzz-plan-" + std::to_string(::getpid());
  ::mkdir(dir.c_str(), 0755);
  std::vector<char> zeros(1 << 20, 0);
  for (const char *name : {"w.bin", "gpt14.weights.bin"}) {
    std::FILE *f = std::fopen((dir + "/" + name).c_str(), "wb");
    rp::fuzz::require(f != nullptr, "cannot write a weight file");
    std::fwrite(zeros.data(), 1, zeros.size(), f);
    std::fclose(f);
  }
  return dir;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = fuzzFolder() + "/model.rpplan";
  std::FILE *f = std::fopen(path.c_str(), "wb");
  rp::fuzz::require(f != nullptr, "cannot write the plan file");
  rp::fuzz::require(std::fwrite(data, 1, size, f) == size,
                    "cannot write the plan file");
  std::fclose(f);
  Expected<Plan> plan = loadPlan(path);
  if (!plan) {
    rp::fuzz::requireUserError(plan.getStatus());
    return 0;
  }
  Expected<std::string> json = describePlanJson(*plan);
  if (!json)
    rp::fuzz::requireUserError(json.getStatus());
  (void)describePlanGrid(*plan);
  return 0;
}
