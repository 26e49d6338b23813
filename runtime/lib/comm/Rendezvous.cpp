//===- Rendezvous.cpp - a job's rank and master from the environment ------===//

#include "rp/runtime/Comm.h"

#include <cstdlib>
#include <string>

using namespace rp::runtime;

rp::runtime::Communicator::~Communicator() = default;

namespace {

/// The integer in variable `name`, in [lo, hi]; `fallback` when unset.
Expected<std::optional<long>> readInt(const char *name, long lo, long hi) {
  const char *v = std::getenv(name);
  if (!v)
    return std::optional<long>();
  char *end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (!*v || *end || errno || x < lo || x > hi)
    return invalidArgument("environment variable " + std::string(name) + "='" +
                           v + "' is not an integer from " +
                           std::to_string(lo) + " to " + std::to_string(hi) +
                           "; the launcher (torchrun, mpirun) sets it");
  return std::optional<long>(x);
}

} // namespace

Expected<std::optional<Rendezvous>> rp::runtime::rendezvousFromEnvironment() {
  // OpenMPI's names first: mpirun sets them on every rank and nothing
  // else does; torchrun's names are the fallback (and what a hand-written
  // launch script sets).
  struct Names {
    const char *rank, *size, *local, *launcher;
  };
  const Names launchers[] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                              "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
                             {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"}};
  for (const Names &n : launchers) {
    auto size = readInt(n.size, 1, 65536);
    if (!size)
      return size.getStatus();
    auto rank = readInt(n.rank, 0, 65535);
    if (!rank)
      return rank.getStatus();
    if (!*size && !*rank)
      continue;
    if (!*size || !*rank)
      return invalidArgument(std::string(*size ? n.rank : n.size) +
                             " is not set but " + (*size ? n.size : n.rank) +
                             " is; set both (or neither, for one process)");
    if (**rank >= **size)
      return invalidArgument(std::string(n.rank) + "=" +
                             std::to_string(**rank) + " is not below " +
                             n.size + "=" + std::to_string(**size));
    auto local = readInt(n.local, 0, 65535);
    if (!local)
      return local.getStatus();
    Rendezvous r;
    r.rank = int(**rank);
    r.worldSize = int(**size);
    r.localRank = *local ? int(**local) : 0;
    r.launcher = n.launcher;
    if (const char *a = std::getenv("MASTER_ADDR"); a && *a)
      r.masterAddr = a;
    auto port = readInt("MASTER_PORT", 1, 65535);
    if (!port)
      return port.getStatus();
    if (*port)
      r.masterPort = int(**port);
    if (r.worldSize == 1)
      return std::optional<Rendezvous>();
    return std::optional<Rendezvous>(r);
  }
  return std::optional<Rendezvous>();
}
