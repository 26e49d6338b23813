//===- RunMetrics.cpp - rp-run --metrics ----------------------------------===//
//
// One JSON object per line and step, appended (a resumed run continues the
// file): {"step", "loss", "loss_at_weights", "lr", "grad_norm",
// "tokens_per_s"}. `loss_at_weights` says whose weights the loss was
// computed at: step k's own in sync mode, step k-1's in async mode
// (DESIGN.md, Optimizer modes), so a plot of the file is never misread.
// --eval-dataset adds {"step", "eval_loss", "after_updates"} after each
// evaluation.
//
//===----------------------------------------------------------------------===//

#include "RunModes.h"
#include "rp/contract/Files.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace rp::runtime;
using namespace rp::runtime::run;

Expected<std::unique_ptr<MetricsLog>> MetricsLog::open(const std::string &path,
                                                       bool sync) {
  if (Status s = checkOutputFolder("--metrics", path); s.failed())
    return s;
  std::unique_ptr<MetricsLog> log(new MetricsLog());
  // Appended, not replaced (a resumed run continues the file), so not the
  // atomic writer; still never through a link, and never a FIFO or device
  // (checked above, and again on the descriptor against a race).
  int fd = ::open(path.c_str(),
                  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                      O_CLOEXEC,
                  0644);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 ||
      !(S_ISREG(st.st_mode) || rp::files::isNullDevice(path))) {
    std::string why = fd < 0 ? std::strerror(errno) : "not a regular file";
    if (fd >= 0)
      ::close(fd);
    return invalidArgument("--metrics: cannot open '" + path + "': " + why);
  }
  log->file = ::fdopen(fd, "a");
  if (!log->file) {
    ::close(fd);
    return invalidArgument("--metrics: cannot open '" + path +
                           "': " + std::strerror(errno));
  }
  log->sync = sync;
  return log;
}

void MetricsLog::loss(unsigned step, double loss, double lr,
                      double tokensPerSecond) {
  std::lock_guard<std::mutex> lock(mutex);
  Entry &e = pending[step];
  e.hasLoss = true;
  e.loss = loss;
  e.lr = lr;
  e.tokensPerSecond = tokensPerSecond;
  if (e.hasUpdate) {
    write(step, e);
    pending.erase(step);
  }
}

void MetricsLog::update(const UpdateMetrics &u) {
  std::lock_guard<std::mutex> lock(mutex);
  Entry &e = pending[u.step];
  e.hasUpdate = true;
  e.lr = u.lr;
  e.gradNorm = u.gradNorm;
  if (e.hasLoss) {
    write(u.step, e);
    pending.erase(u.step);
  }
}

void MetricsLog::eval(unsigned updates, double loss) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!file)
    return;
  // At the weights after `updates` updates: step updates-1's (the line
  // rp finetune wrote before rp-run evaluated).
  std::fprintf(file,
               "{\"step\": %u, \"eval_loss\": %.9g, \"after_updates\": "
               "%u}\n",
               updates ? updates - 1 : 0, loss, updates);
  std::fflush(file);
}

void MetricsLog::finish() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &[step, e] : pending)
    if (e.hasLoss)
      write(step, e);
  pending.clear();
  if (file)
    std::fclose(file);
  file = nullptr;
}

void MetricsLog::write(unsigned step, const Entry &e) {
  if (!file)
    return;
  // %.9g as the step lines; the lr exactly (%.17g), so a schedule can be
  // compared with another's.
  auto number = [](double v, int digits = 9) {
    char text[40];
    if (!std::isfinite(v))
      return std::string("null");
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    return std::string(text);
  };
  unsigned at = sync || step == 0 ? step : step - 1;
  std::fprintf(file,
               "{\"step\": %u, \"loss\": %s, \"loss_at_weights\": %u, "
               "\"lr\": %s, \"grad_norm\": %s, \"tokens_per_s\": %s}\n",
               step, number(e.loss).c_str(), at, number(e.lr, 17).c_str(),
               e.hasUpdate ? number(e.gradNorm).c_str() : "null",
               number(e.tokensPerSecond).c_str());
  std::fflush(file);
}
