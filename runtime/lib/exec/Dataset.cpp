//===- Dataset.cpp - the pretokenized dataset rp-run --dataset reads ------===//
//
// `python -m rp data` writes a dataset file once (docs/finetune.md gives the
// format): a 64-byte header, then the rows' tokens, labels (-100 where the
// loss ignores the token: prompts, padding, a document's last token) and
// segments (the document each token belongs to), int32 little-endian. The
// trainer reads a global batch of rows per step, epoch after epoch, in file
// order or in a seeded shuffle per epoch that python/rp/data.py reproduces
// (splitmix64 and Fisher-Yates, so tests can name the rows of a step).
// The position is the count of rows read; a checkpoint holds it, so a run
// resumed mid-epoch reads what the uninterrupted one would.
//
//===----------------------------------------------------------------------===//

#include "TrainerParts.h"
#include "rp/runtime/FileIO.h"

#include <cstring>
#include <numeric>

using namespace rp::runtime;

namespace rp::runtime::detail {

namespace {

constexpr char kMagic[8] = {'R', 'P', 'D', 'S', 'E', 'T', '0', '1'};
constexpr size_t kHeaderBytes = 64;

uint64_t readLittle(const std::string &raw, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t b = 0; b < bytes; ++b)
    v |= uint64_t(static_cast<unsigned char>(raw[at + b])) << (8 * b);
  return v;
}

/// splitmix64: the generator python/rp/data.py reproduces bit for bit.
uint64_t splitmix(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

Expected<TokenStream> TokenStream::openDataset(const std::string &path,
                                               bool shuffle, uint64_t seed) {
  // The header, then the three arrays straight into the stream's own: a
  // dataset is held once, not also as the file's bytes.
  Expected<PieceReader> file = PieceReader::open(path, "dataset");
  if (!file)
    return file.getStatus();
  auto bad = [&](const std::string &why) {
    return invalidFormat("dataset '" + path + "' " + why +
                         "; write it with `python -m rp data`");
  };
  std::string head(kHeaderBytes, '\0');
  if (file->size() < kHeaderBytes)
    return bad("is not an rp dataset (no RPDSET01 header)");
  if (Status st = file->readAt(0, head.data(), kHeaderBytes); st.failed())
    return st;
  if (std::memcmp(head.data(), kMagic, 8) != 0)
    return bad("is not an rp dataset (no RPDSET01 header)");
  TokenStream s;
  s.isDataset = true;
  s.rowLength = uint32_t(readLittle(head, 8, 4));
  s.rows = readLittle(head, 16, 8);
  uint64_t cells = s.rows * s.rowLength;
  if (s.rowLength == 0 || s.rows == 0 || (cells / s.rowLength != s.rows) ||
      cells > (file->size() - kHeaderBytes) / 12 ||
      file->size() != kHeaderBytes + 3 * 4 * cells)
    return bad("holds " + std::to_string(file->size()) + " bytes, not the " +
               std::to_string(s.rows) + " rows of " +
               std::to_string(s.rowLength) + " tokens its header gives");
  if (file->size() > physicalMemoryBytes())
    return bad("holds " + std::to_string(file->size()) +
               " bytes, more than this machine's memory");
  s.rowTokens.resize(cells);
  s.rowLabels.resize(cells);
  s.rowSegments.resize(cells);
  uint64_t at = kHeaderBytes;
  for (std::vector<int32_t> *to :
       {&s.rowTokens, &s.rowLabels, &s.rowSegments}) {
    if (Status st = file->readAt(at, to->data(), 4 * cells); st.failed())
      return st;
    at += 4 * cells;
  }
  s.shuffle = shuffle;
  s.shuffleSeed = seed;
  return s;
}

uint64_t TokenStream::rowAt(uint64_t at) {
  uint64_t epoch = at / rows, index = at % rows;
  if (!shuffle)
    return index;
  if (epoch != orderEpoch) {
    order.resize(rows);
    std::iota(order.begin(), order.end(), 0);
    uint64_t state = shuffleSeed ^ (epoch * 0xD1B54A32D192ED03ull);
    for (uint64_t i = rows - 1; i > 0; --i)
      std::swap(order[i], order[splitmix(state) % (i + 1)]);
    orderEpoch = epoch;
  }
  return order[index];
}

Status TokenStream::nextRows(NpyArray &tokensOut, NpyArray &labelsOut,
                             int64_t limit) {
  int64_t count = tokensOut.shape[0], seq = tokensOut.shape[1];
  if (seq != int64_t(rowLength))
    return invalidArgument(
        "the dataset's rows hold " + std::to_string(rowLength) +
        " tokens, the plan's sequences " + std::to_string(seq) +
        "; write it with --seq-len " + std::to_string(seq));
  auto *t = reinterpret_cast<int64_t *>(tokensOut.data.data());
  auto *l = reinterpret_cast<int64_t *>(labelsOut.data.data());
  int64_t *sg = segmentsOut
                    ? reinterpret_cast<int64_t *>(segmentsOut->data.data())
                    : nullptr;
  lastCount = 0;
  // Every rank walks the whole global batch and keeps its own rows, as
  // with --data; the count is the global batch's.
  for (int64_t g = 0; g < count * world; ++g) {
    uint64_t row = rowAt(position++);
    const int32_t *rt = rowTokens.data() + row * rowLength;
    const int32_t *rl = rowLabels.data() + row * rowLength;
    const int32_t *rs = rowSegments.data() + row * rowLength;
    int64_t r = g - int64_t(rank) * count;
    for (int64_t k = 0; k < seq; ++k) {
      if (rl[k] != -100)
        ++lastCount;
      if (r < 0 || r >= count)
        continue;
      for (int32_t v : {rt[k], rl[k]})
        if (v != -100 && (v < 0 || (limit > 0 && v >= limit)))
          return invalidArgument(
              "token " + std::to_string(v) + " of the dataset's row " +
              std::to_string(row) + " is outside the model's vocabulary of " +
              std::to_string(limit));
      t[r * seq + k] = rt[k];
      l[r * seq + k] = rl[k];
      if (sg)
        sg[r * seq + k] = rs[k];
    }
  }
  return Status::ok();
}

} // namespace rp::runtime::detail
