//===- EinsumHandler.cpp - Einsum on run-time values ----------------------===//
//
// Einsum folds at import when every operand is constant (EvalCompute.cpp);
// on run-time values (XLNet's and ProphetNet's relative attention,
// Falcon-H1's Mamba mixer) it becomes rp ops whose VJPs give its gradient:
//
//   - a letter only one operand has and nothing after it reads is summed
//     away first (ReduceOp);
//   - the operands then fold left to right, two at a time, as one batched
//     matmul: each side transposed to [batch, own, summed] (the other
//     [batch, summed, own]) and reshaped to three dimensions, the product
//     reshaped back to [batch, left's own, right's own];
//   - the last operand is transposed to the output's order.
//
// A letter repeated in one operand (a diagonal) and ellipses are refused,
// as the folder refuses ellipses.
//
//===----------------------------------------------------------------------===//

#include "NodeImporter.h"

using namespace mlir;
using namespace mlir::rp;
using namespace mlir::rp::onnx_import;

namespace {

/// A value and the letter of each of its dimensions.
struct Term {
  Value v;
  std::string letters;
};

class Einsum {
public:
  explicit Einsum(NodeImporter &n) : n(n) {}
  LogicalResult run();

private:
  int64_t size(char c) const { return sizes.lookup(c); }
  /// Sums away the letters of `t` that `keep` lacks.
  Term sumAway(Term t, StringRef keep);
  Term permute(Term t, StringRef order);
  Term contract(Term a, Term b, StringRef keep);

  NodeImporter &n;
  llvm::DenseMap<char, int64_t> sizes;
};

} // namespace

Term Einsum::sumAway(Term t, StringRef keep) {
  SmallVector<int64_t> axes;
  std::string left;
  for (auto [d, c] : llvm::enumerate(t.letters))
    if (keep.contains(c))
      left += c;
    else
      axes.push_back(int64_t(d));
  if (axes.empty())
    return t;
  return {n.create<ReduceOp>(ReduceKind::sum, t.v, axes, false), left};
}

Term Einsum::permute(Term t, StringRef order) {
  if (t.letters == order)
    return t;
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(int64_t(t.letters.find(c)));
  return {n.create<TransposeOp>(t.v, perm), order.str()};
}

Term Einsum::contract(Term a, Term b, StringRef keep) {
  std::string batch, summed, ownA, ownB;
  for (char c : a.letters)
    (b.letters.find(c) == std::string::npos ? ownA
     : keep.contains(c)                     ? batch
                                            : summed) += c;
  for (char c : b.letters)
    if (a.letters.find(c) == std::string::npos)
      ownB += c;
  auto product = [&](StringRef letters) {
    int64_t p = 1;
    for (char c : letters)
      p *= size(c);
    return p;
  };
  a = permute(a, batch + ownA + summed);
  b = permute(b, batch + summed + ownB);
  Value x = n.reshape(a.v, {product(batch), product(ownA), product(summed)});
  Value y = n.reshape(b.v, {product(batch), product(summed), product(ownB)});
  Value z = n.create<MatmulOp>(x, y, false, false);
  std::string letters = batch + ownA + ownB;
  SmallVector<int64_t> shape;
  for (char c : letters)
    shape.push_back(size(c));
  return {n.reshape(z, shape), letters};
}

LogicalResult Einsum::run() {
  std::string eq;
  for (char c : n.stringAttr("equation", ""))
    if (c != ' ')
      eq += c;
  if (StringRef(eq).contains('.'))
    return n.error() << "equation '" << eq
                     << "' uses an ellipsis, which rp does not import; "
                        "re-export with the dimensions named";
  auto [lhs, rhs] = StringRef(eq).split("->");
  bool implicit = !StringRef(eq).contains("->");
  SmallVector<StringRef> parts;
  lhs.split(parts, ',');
  if (int(parts.size()) != n.numInputs())
    return n.error() << "equation '" << eq << "' has " << parts.size()
                     << " operands but the node has " << n.numInputs()
                     << " inputs";
  SmallVector<Term> terms;
  llvm::DenseMap<char, int> count;
  Type element;
  for (auto [k, part] : llvm::enumerate(parts)) {
    Value v = n.input(int(k));
    if (!v)
      return failure();
    auto type = cast<RankedTensorType>(v.getType());
    if (!element)
      element = type.getElementType();
    if (type.getElementType() != element || !isa<FloatType>(element))
      return n.error() << "operand " << k << " is " << type
                       << ": rp imports Einsum of float operands of one type";
    if (int64_t(part.size()) != type.getRank())
      return n.error() << "operand " << k << " is " << type << ", but '" << part
                       << "' names " << part.size() << " dimensions";
    for (auto [d, c] : llvm::enumerate(part)) {
      if (!std::isalpha(static_cast<unsigned char>(c)))
        return n.error() << "bad letter '" << c << "' in '" << eq << "'";
      if (part.take_front(d).contains(c))
        return n.error() << "letter '" << c << "' repeats in operand " << k
                         << " ('" << part
                         << "', a diagonal), which rp does not import";
      auto [it, inserted] = sizes.try_emplace(c, type.getShape()[d]);
      if (!inserted && it->second != type.getShape()[d])
        return n.error() << "letter '" << c << "' has sizes " << it->second
                         << " and " << type.getShape()[d];
      ++count[c];
    }
    terms.push_back({v, part.str()});
  }
  std::string out = rhs.str();
  if (implicit) { // letters used once, in alphabetical order
    for (auto &entry : count)
      if (entry.second == 1)
        out += entry.first;
    llvm::sort(out);
  }
  for (char c : out)
    if (!sizes.count(c) || StringRef(out).count(c) > 1)
      return n.error() << "output letter '" << c
                       << "' is in no operand, or repeats";
  // What must survive operand k: the output's letters and those of the
  // operands after it.
  auto after = [&](size_t k) {
    std::string keep = out;
    for (size_t j = k + 1; j < terms.size(); ++j)
      keep += terms[j].letters;
    return keep;
  };
  auto others = [&](size_t k) {
    std::string keep = out;
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != k)
        keep += terms[j].letters;
    return keep;
  };
  for (size_t k = 0; k < terms.size(); ++k)
    terms[k] = sumAway(terms[k], others(k));
  Term acc = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) {
    std::string keep = after(k);
    // A letter of the product so far that neither this operand nor
    // anything after reads is summed before the product.
    acc = sumAway(acc, keep + terms[k].letters);
    acc = contract(acc, terms[k], keep);
  }
  acc = permute(sumAway(acc, out), out);
  n.setOutput(0, acc.v);
  return success();
}

void onnx_import::registerEinsumHandler(llvm::StringMap<Handler> &t) {
  t["Einsum"] = [](NodeImporter &n) { return Einsum(n).run(); };
}
