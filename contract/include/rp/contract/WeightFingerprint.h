//===- WeightFingerprint.h - the weights a plan was made with --*- C++ -*-===//
//
// rp-compile writes a plan's weight file first and the plan after it, each
// atomically; a crash between the two renames leaves the new weights
// beside the previous plan. The plan records its weight file's fingerprint
// and the loader compares it, so such a pair is refused with a message
// instead of running on weights the plan was not made for. The fingerprint
// hashes the file's size and 64 blocks of 4 KiB spread evenly over it (the
// first and the last included), so checking it reads 256 KiB whatever the
// model's size; any retraining or re-import of other weights changes it.
// Header-only: the compiler's exporter and the runtime's loader share it.
//
//===----------------------------------------------------------------------===//

#ifndef RP_CONTRACT_WEIGHTFINGERPRINT_H
#define RP_CONTRACT_WEIGHTFINGERPRINT_H

#include <cstdint>
#include <fcntl.h>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace rp::plan {

/// The fingerprint of the regular file `path`; none when it cannot be
/// read. Never 0 (0 in a plan means "not recorded").
inline std::optional<uint64_t> weightFileFingerprint(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return std::nullopt;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  uint64_t size = uint64_t(st.st_size), h = 1469598103934665603ull;
  auto mix = [&h](const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(reinterpret_cast<const unsigned char *>(&size), sizeof size);
  constexpr uint64_t kBlocks = 64, kBlock = 4096;
  std::vector<unsigned char> block(kBlock);
  for (uint64_t b = 0; b < kBlocks && size > 0; ++b) {
    uint64_t span = size > kBlock ? size - kBlock : 0;
    uint64_t at = span * b / (kBlocks - 1);
    size_t want = size_t(size - at < kBlock ? size - at : kBlock), got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd, block.data() + got, want - got, off_t(at + got));
      if (n <= 0) {
        ::close(fd);
        return std::nullopt;
      }
      got += size_t(n);
    }
    mix(block.data(), want);
  }
  ::close(fd);
  return h ? h : 1;
}

} // namespace rp::plan

#endif // RP_CONTRACT_WEIGHTFINGERPRINT_H
