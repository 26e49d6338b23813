//===- RunAgree.cpp - the ranks of a job agree before they train ----------===//
//
// Ranks started with a different plan, weights, data or option train
// different models while their gradients are summed as one: each prints a
// loss and exits 0 (DESIGN.md's Ranks contract forbids it). Once the job
// is joined, every rank sends every other its fingerprint: one record per
// setting that changes results, a hash of the setting (of the contents for
// the plan, weights and data, so that paths may differ from box to box) and
// the setting as the user wrote it. Every rank compares all of them the
// same way, so a difference is an exit 1 on every rank, naming the setting
// and which ranks have which value.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"

#include "rp/contract/WeightFingerprint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

using namespace rp::runtime;
using namespace rp::runtime::run;

namespace {

/// FNV-1a over 8-byte words, continued from `h`: a word at a time, as the
/// weights of a large model are hashed whole.
uint64_t mix(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  size_t i = 0;
  for (uint64_t w; i + 8 <= n; i += 8) {
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
uint64_t mix(uint64_t h, const std::string &s) {
  uint64_t n = s.size();
  return mix(mix(h, &n, sizeof n), s.data(), s.size());
}
constexpr uint64_t kSeed = 1469598103934665603ull;

/// A file's contents, sampled as the plan's weight fingerprint is (a
/// missing file is its path: every rank then names the same thing).
uint64_t fileHash(const std::string &path) {
  std::optional<uint64_t> f = ::rp::plan::weightFileFingerprint(path);
  return f ? *f : mix(kSeed, "missing " + path);
}

/// Every regular file of a checkpoint folder, by name.
uint64_t folderHash(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec))
      names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  uint64_t h = kSeed;
  for (const std::string &n : names) {
    uint64_t f = fileHash(dir + "/" + n);
    h = mix(mix(h, n), &f, sizeof f);
  }
  return h;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

struct Setting {
  std::string name, value;
  uint64_t hash;
};

/// What this rank would train with.
std::vector<Setting> settingsOf(const RunOptions &o, const Plan &plan,
                                const ComputeSetup &setup,
                                const Communicator &comm) {
  std::vector<Setting> s;
  auto text = [&s](const char *name, std::string value) {
    uint64_t h = mix(kSeed, value);
    s.push_back({name, std::move(value), h});
  };
  s.push_back(
      {"the plan", o.planPath, mix(kSeed, plan.raw.data(), plan.raw.size())});
  // The initial weights as loaded (the plan's weight file, --init-weights
  // over it): every host buffer that holds a stored parameter.
  uint64_t weights = mix(kSeed, o.initWeights);
  for (uint32_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].weight && plan.buffers[i].onHost()) {
      TensorRef t = setup.fwd->buffer(i);
      if (t.data)
        weights = mix(weights, t.data, t.bytes());
    }
  s.push_back({"the initial weights",
               o.initWeights.empty() ? "the plan's weight file"
                                     : "--init-weights " + o.initWeights,
               weights});
  s.push_back({"--resume", o.train.resume.empty() ? "none" : o.train.resume,
               o.train.resume.empty() ? 0 : folderHash(o.train.resume)});
  // The data: its contents, not its path.
  if (!o.train.data.empty()) {
    s.push_back({"the data", "--data " + o.train.data + " (" + o.dataType + ")",
                 mix(fileHash(o.train.data), o.dataType)});
  } else if (!o.train.dataset.empty()) {
    std::string order =
        o.shuffle ? " shuffled from " + std::to_string(o.shuffleSeed) : "";
    s.push_back({"the data", "--dataset " + o.train.dataset + order,
                 mix(fileHash(o.train.dataset), order)});
  } else {
    uint64_t h = kSeed;
    std::string names;
    for (const auto &[name, array] : o.train.inputs) {
      h = mix(mix(h, name), array.data.data(), array.data.size());
      names += (names.empty() ? "" : ", ") + name;
    }
    s.push_back({"the data",
                 names.empty() ? "synthetic (from --seed)"
                               : "--input/--labels (" + names + ")",
                 h});
  }
  text("--seed", std::to_string(o.seed));
  text("--steps", std::to_string(o.steps));
  text("--optimizer", o.optimizer);
  text("--lr", number(o.lr));
  text("the learning-rate schedule",
       "--lr-schedule " + o.lrSchedule + " --warmup-steps " +
           std::to_string(o.train.schedule.warmup) + " --total-steps " +
           std::to_string(o.train.schedule.total));
  // Every optimizer's settings, whichever runs: each rank must send as
  // many records as the others.
  text("--beta1", number(o.train.adamw.beta1));
  text("--beta2", number(o.train.adamw.beta2));
  text("--eps", number(o.train.adamw.eps));
  text("--momentum", number(o.train.sgdConfig.momentum));
  text("--weight-decay",
       o.weightDecayGiven ? number(o.weightDecay) : "the optimizer's default");
  text("--clip-grad-norm", number(o.train.clipGradNorm));
  text("--sync/--async", o.syncMode ? "sync" : "async");
  text("--accumulate", std::to_string(o.accumulate));
  text("--shard-optimizer", o.train.shardOptimizer ? "on" : "off");
  text("the loss scaling", o.noLossScaling
                               ? "--no-loss-scaling"
                               : "from " + number(o.initialLossScale));
  text("--tf32", o.tf32 ? "on" : "off");
  const Rendezvous &r = comm.rendezvous();
  text("the world", std::to_string(r.worldSize) + " ranks, master " +
                        r.masterAddr + ":" + std::to_string(r.masterPort));
  return s;
}

/// A setting's record on the wire: its hash, then its value as text
/// (shortened; the hash decides).
constexpr size_t kValueBytes = 120;
struct Record {
  uint64_t hash;
  char value[kValueBytes];
};

std::string rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

} // namespace

Status rp::runtime::run::checkRanksAgree(const RunOptions &o, const Plan &plan,
                                         const ComputeSetup &setup,
                                         Communicator &comm) {
  std::vector<Setting> mine = settingsOf(o, plan, setup, comm);
  size_t n = mine.size(), world = size_t(comm.size());
  std::vector<Record> sent(n), all(n * world);
  for (size_t i = 0; i < n; ++i) {
    sent[i].hash = mine[i].hash;
    std::memset(sent[i].value, 0, kValueBytes);
    std::strncpy(sent[i].value, mine[i].value.c_str(), kValueBytes - 1);
  }
  if (Status s = comm.allGather(sent.data(), all.data(), n * sizeof(Record));
      s.failed())
    return Status(s.getCode(),
                  "rank " + std::to_string(comm.rank()) +
                      ": the ranks could not compare their settings before "
                      "training: " +
                      s.getMessage());
  std::string differ;
  for (size_t i = 0; i < n; ++i) {
    // The ranks of each value, in the order the values first appear.
    std::vector<std::pair<const Record *, std::vector<int>>> groups;
    for (size_t r = 0; r < world; ++r) {
      const Record &rec = all[r * n + i];
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](auto &x) { return x.first->hash == rec.hash; });
      if (g == groups.end())
        groups.push_back({&rec, {int(r)}});
      else
        g->second.push_back(int(r));
    }
    if (groups.size() < 2)
      continue;
    std::string text;
    for (auto &[rec, ranks] : groups)
      text += (text.empty() ? "" : "; ") + rankList(ranks) + ": " +
              std::string(rec->value, strnlen(rec->value, kValueBytes));
    differ += (differ.empty() ? "" : ", ") + mine[i].name + " (" + text + ")";
  }
  if (differ.empty())
    return Status::ok();
  return invalidArgument(
      "rank " + std::to_string(comm.rank()) +
      ": the ranks were started with different settings, so they would "
      "train different models: " +
      differ +
      "; start every rank with the same plan, weights, data and options");
}
