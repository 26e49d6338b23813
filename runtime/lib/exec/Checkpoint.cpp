//===- Checkpoint.cpp - rp-run's checkpoint folders -----------------------===//

#include "rp/runtime/Checkpoint.h"
#include "rp/contract/Files.h"
#include "rp/runtime/FileIO.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

using namespace rp::runtime;
namespace fs = std::filesystem;

std::string rp::runtime::formatCheckpointState(const CheckpointState &state) {
  nlohmann::json j = {{"step", state.step},
                      {"sync", state.sync},
                      {"optimizer", state.sgd ? "sgd" : "adamw"},
                      {"data_position", state.dataPosition},
                      {"updates", state.updates},
                      {"loss_scale", state.lossScale},
                      {"step_loss_scale", state.stepLossScale},
                      {"good_steps", state.goodSteps}};
  if (state.seed)
    j["seed"] = *state.seed;
  if (state.shuffleSeed)
    j["shuffle_seed"] = *state.shuffleSeed;
  if (state.schedule)
    j["lr_schedule"] = {{"kind", state.schedule->kind},
                        {"lr", state.schedule->lr},
                        {"warmup_steps", state.schedule->warmup},
                        {"total_steps", state.schedule->total}};
  return j.dump(2) + "\n";
}

/// state.json's "lr_schedule": every field present, of its type and range
/// (rp-run's own limits on the options).
static Expected<CheckpointSchedule>
parseSchedule(const nlohmann::json &j,
              const std::function<Status(const std::string &)> &bad) {
  if (!j.is_object())
    return bad("'lr_schedule' is " + j.dump() + ", not an object");
  CheckpointSchedule s;
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() ||
      (*kind != "constant" && *kind != "linear" && *kind != "cosine"))
    return bad("'lr_schedule.kind' is " +
               (kind == j.end() ? std::string("missing") : kind->dump()) +
               ", not \"constant\", \"linear\" or \"cosine\"");
  s.kind = kind->get<std::string>();
  auto lr = j.find("lr");
  if (lr == j.end() || !lr->is_number() || !std::isfinite(lr->get<double>()) ||
      lr->get<double>() < 0)
    return bad("'lr_schedule.lr' is " +
               (lr == j.end() ? std::string("missing") : lr->dump()) +
               ", not a finite number >= 0");
  s.lr = lr->get<double>();
  for (auto [key, out] : {std::pair{"warmup_steps", &s.warmup},
                          std::pair{"total_steps", &s.total}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned() ||
        it->get<uint64_t>() > kMaxCheckpointSteps)
      return bad("'lr_schedule." + std::string(key) + "' is " +
                 (it == j.end() ? std::string("missing") : it->dump()) +
                 ", not an integer from 0 to " +
                 std::to_string(kMaxCheckpointSteps));
    *out = unsigned(it->get<uint64_t>());
  }
  return s;
}

Expected<CheckpointState>
rp::runtime::parseCheckpointState(std::string_view text,
                                  const std::string &path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto bad = [&](const std::string &what) {
    return invalidFormat(path + " is not a usable checkpoint state: " + what +
                         "; resume from a checkpoint rp-run --save wrote");
  };
  if (j.is_discarded() || !j.is_object())
    return bad("it is not a JSON object");
  // A count field: an integer from 0 to `max`; absent: `fallback`.
  auto count = [&](const char *key, uint64_t max, uint64_t fallback,
                   uint64_t &out) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      out = fallback;
      return Status::ok();
    }
    if (!it->is_number_unsigned() || it->get<uint64_t>() > max)
      return bad("'" + std::string(key) + "' is " + it->dump() +
                 ", not an integer from 0 to " + std::to_string(max));
    out = it->get<uint64_t>();
    return Status::ok();
  };
  CheckpointState state;
  if (!j.contains("step"))
    return bad("it has no 'step'");
  uint64_t step = 0, updates = 0, goodSteps = 0;
  if (Status s = count("step", kMaxCheckpointSteps, 0, step); s.failed())
    return s;
  state.step = unsigned(step);
  if (Status s = count("updates", state.step, state.step, updates); s.failed())
    return s;
  state.updates = unsigned(updates);
  if (Status s = count("good_steps", state.step, 0, goodSteps); s.failed())
    return s;
  state.goodSteps = unsigned(goodSteps);
  // The data position is checked against the data file when it is opened.
  if (Status s = count("data_position", UINT64_MAX, 0, state.dataPosition);
      s.failed())
    return s;
  if (j.contains("seed")) {
    uint64_t seed = 0;
    if (Status s = count("seed", UINT64_MAX, 0, seed); s.failed())
      return s;
    state.seed = seed;
  }
  if (j.contains("shuffle_seed")) {
    uint64_t seed = 0;
    if (Status s = count("shuffle_seed", UINT64_MAX, 0, seed); s.failed())
      return s;
    state.shuffleSeed = seed;
  }
  if (auto it = j.find("lr_schedule"); it != j.end()) {
    Expected<CheckpointSchedule> schedule = parseSchedule(*it, bad);
    if (!schedule)
      return schedule.getStatus();
    state.schedule = *schedule;
  }
  if (auto it = j.find("sync"); it != j.end()) {
    if (!it->is_boolean())
      return bad("'sync' is " + it->dump() + ", not true or false");
    state.sync = it->get<bool>();
  }
  if (auto it = j.find("optimizer"); it != j.end()) {
    if (!it->is_string() || (*it != "adamw" && *it != "sgd"))
      return bad("'optimizer' is " + it->dump() + ", not \"adamw\" or \"sgd\"");
    state.sgd = *it == "sgd";
  }
  // 0: no loss scaling.
  for (auto [key, out] : {std::pair{"loss_scale", &state.lossScale},
                          std::pair{"step_loss_scale", &state.stepLossScale}})
    if (auto it = j.find(key); it != j.end()) {
      double v = it->is_number() ? it->get<double>() : -1;
      if (!it->is_number() || !std::isfinite(v) || v < 0)
        return bad("'" + std::string(key) + "' is " + it->dump() +
                   ", not a finite number >= 0");
      *out = v;
    }
  return state;
}

Status rp::runtime::checkSaveTarget(const std::string &given) {
  if (rp::files::FileError e = rp::files::checkFolderTarget(given, "--save"))
    return invalidArgument(e.message);
  // "ck/" is the folder ck: the save goes beside it, not inside.
  std::string dir = rp::files::withoutTrailingSlashes(given);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    // Made at the end (with missing parents): a parent that exists must
    // take new names now, not after the whole run.
    std::string parent = rp::files::folderOf(dir);
    while (::stat(parent.c_str(), &st) != 0 && parent != "." && parent != "/")
      parent = rp::files::folderOf(parent);
    if (::stat(parent.c_str(), &st) == 0 &&
        (!S_ISDIR(st.st_mode) || ::access(parent.c_str(), W_OK | X_OK) != 0))
      return invalidArgument(
          "--save '" + given + "': cannot create it in '" + parent + "' (" +
          (S_ISDIR(st.st_mode) ? "not writable" : "not a folder") +
          "); give a path in a folder you can write");
    return Status::ok();
  }
  std::string refuse = "--save '" + given + "' ";
  std::string fix = "; the save would replace it: give a new path, or "
                    "remove it first";
  if (!S_ISDIR(st.st_mode))
    return invalidArgument(refuse + "exists and is not a folder" + fix);
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec)
    return Status::ok();
  if (!fs::is_regular_file(fs::path(dir) / "state.json", ec))
    return invalidArgument(refuse +
                           "is a folder that is not an rp checkpoint "
                           "(it has no state.json)" +
                           fix);
  return Status::ok();
}

Expected<std::string> rp::runtime::findCheckpoint(const std::string &dir) {
  std::error_code ec;
  for (const std::string &candidate : {dir, dir + ".old"})
    if (fs::exists(fs::path(candidate) / "state.json", ec))
      return candidate;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return invalidArgument("--resume '" + dir +
                           "' is not a folder; give the checkpoint folder "
                           "rp-run --save wrote");
  return notFound("'" + dir + "' is not a checkpoint (no state.json)");
}

Expected<CheckpointState>
rp::runtime::readCheckpointState(const std::string &dir) {
  Expected<std::string> folder = findCheckpoint(dir);
  if (!folder)
    return folder.getStatus();
  std::string statePath = *folder + "/state.json";
  Expected<std::string> text =
      readRegularFile(statePath, "checkpoint state", kMaxJsonBytes);
  if (!text)
    return text.getStatus();
  return parseCheckpointState(*text, statePath);
}

Status
rp::runtime::saveCheckpointFolder(const std::string &given,
                                  const std::vector<CheckpointFile> &files,
                                  const CheckpointState &state) {
  if (rp::files::FileError e = rp::files::checkFolderTarget(given, "--save"))
    return invalidArgument(e.message);
  std::string dir = rp::files::withoutTrailingSlashes(given);
  // Missing parent folders are made, as --save always did.
  std::error_code ec;
  if (fs::path parent = fs::path(dir).parent_path(); !parent.empty())
    fs::create_directories(parent, ec);
  Expected<std::string> made = makeTempFolderBeside(dir, "checkpoint");
  if (!made)
    return made.getStatus();
  // The temporary folder is ours alone (mkdtemp), so a failed save removes
  // it; a killed one leaves it for the user, never touching another's.
  std::string tmp = *made;
  auto save = [&]() -> Status {
    for (const CheckpointFile &f : files)
      if (Status s = writeSafetensors(tmp + "/" + f.name, f.tensors);
          s.failed())
        return s;
    // state.json last: a folder without it is never taken for a checkpoint.
    if (Status s = writeFileAtomic(tmp + "/state.json",
                                   formatCheckpointState(state), "state.json");
        s.failed())
      return s;
    return replaceFolder(tmp, dir);
  };
  Status s = save();
  if (s.failed())
    fs::remove_all(tmp, ec);
  return s;
}
