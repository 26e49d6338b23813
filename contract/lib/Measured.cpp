//===- Measured.cpp - the measured-profile format -------------------------===//

#include "rp/timing/Measured.h"

#include "Json.h"

#include <cmath>

using namespace rp::timing;

std::optional<MeasuredTimes>
rp::timing::parseMeasuredTimes(const std::string &text,
                               const std::string &source, std::string &error) {
  nlohmann::json j;
  if (!rp::contract::parseJson(text, "measured profile", source, j, error))
    return std::nullopt;
  auto fail = [&](const std::string &what) {
    error = "measured profile '" + source + "': " + what;
    return std::nullopt;
  };
  if (!j.is_object() || !(j.contains("layers") || j.contains("ops")) ||
      (j.contains("layers") && !j["layers"].is_array()))
    return fail("expected an object with a \"layers\" array (or an "
                "\"ops\" array)");
  MeasuredTimes times;
  if (j.contains("hw") && j["hw"].is_string())
    times.hw = j["hw"].get<std::string>();
  if (j.contains("note") && j["note"].is_string())
    times.note = j["note"].get<std::string>();
  if (j.contains("backward_includes_accumulation")) {
    if (!j["backward_includes_accumulation"].is_boolean())
      return fail("\"backward_includes_accumulation\" must be true or false");
    times.backwardIncludesAccumulation =
        j["backward_includes_accumulation"].get<bool>();
  }
  const nlohmann::json noLayers = nlohmann::json::array();
  const nlohmann::json &layerList =
      j.contains("layers") ? j["layers"] : noLayers;
  for (size_t i = 0; i < layerList.size(); ++i) {
    const nlohmann::json &l = layerList[i];
    if (!l.is_object() || !l.contains("name") || !l["name"].is_string())
      return fail("layers[" + std::to_string(i) + "] needs a \"name\"");
    std::string name = l["name"].get<std::string>();
    if (times.layers.count(name))
      return fail("layer '" + name + "' is listed twice");
    MeasuredLayerTimes t;
    for (auto [key, field] :
         {std::pair<const char *, double *>{"forward_ms", &t.forwardMs},
          {"recompute_ms", &t.recomputeMs},
          {"backward_ms", &t.backwardMs}}) {
      if (!l.contains(key))
        continue;
      if (!l[key].is_number() || l[key].get<double>() < 0)
        return fail("layer '" + name + "': \"" + key +
                    "\" must be a number of milliseconds, at least 0");
      *field = l[key].get<double>();
    }
    if (t.recomputeMs < 0)
      t.recomputeMs = t.forwardMs;
    times.layers[name] = t;
    times.order.push_back(name);
  }
  if (!j.contains("ops"))
    return times;
  if (!j.contains("ops_format") || !j["ops_format"].is_number_integer())
    return fail("an \"ops\" section needs \"ops_format\": " +
                std::to_string(kMeasuredOpsFormat));
  if (j["ops_format"].get<int64_t>() == 1)
    return fail("\"ops_format\" 1 keys calls without their attributes, so "
                "an entry may mix a causal attention with a full one or a "
                "transposed matmul with a plain one; this build reads "
                "format " +
                std::to_string(kMeasuredOpsFormat) +
                ": measure again with this build's rp-run --profile");
  if (j["ops_format"].get<int64_t>() != kMeasuredOpsFormat)
    return fail("\"ops_format\" " + j["ops_format"].dump() +
                " is not the one this build reads (" +
                std::to_string(kMeasuredOpsFormat) +
                "); measure again with this build's rp-run --profile");
  if (!j["ops"].is_array())
    return fail("\"ops\" must be an array");
  for (size_t i = 0; i < j["ops"].size(); ++i) {
    const nlohmann::json &o = j["ops"][i];
    std::string where = "ops[" + std::to_string(i) + "]";
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string())
      return fail(where + " needs an \"op\" (an op kind name)");
    MeasuredOpTime t;
    t.op = o["op"].get<std::string>();
    if (kernelOpIndex(t.op) < 0)
      return fail(where + ": \"" + t.op + "\" is not an op kind of plan.fbs");
    if (!o.contains("dtype") || !o["dtype"].is_string())
      return fail(where + " needs a \"dtype\" (an element type name)");
    t.dtype = o["dtype"].get<std::string>();
    for (auto [name, shapes] :
         {std::pair<const char *, std::vector<std::vector<int64_t>> *>{
              "inputs", &t.inputs},
          {"outputs", &t.outputs}}) {
      // A plain copy: clang 14 (the ASan tree's) cannot capture a
      // structured binding in a lambda.
      const char *key = name;
      auto bad = [&] {
        return fail(where + ": \"" + key +
                    "\" must be an array of shapes (arrays of sizes, at "
                    "least 0)");
      };
      if (!o.contains(key) || !o[key].is_array())
        return bad();
      for (const nlohmann::json &shape : o[key]) {
        if (!shape.is_array())
          return bad();
        std::vector<int64_t> dims;
        for (const nlohmann::json &d : shape) {
          if (!d.is_number_integer() || d.get<int64_t>() < 0)
            return bad();
          dims.push_back(d.get<int64_t>());
        }
        shapes->push_back(std::move(dims));
      }
    }
    if (o.contains("attrs")) {
      if (!o["attrs"].is_array())
        return fail(where + ": \"attrs\" must be an array of integers");
      for (const nlohmann::json &a : o["attrs"]) {
        if (!a.is_number_integer())
          return fail(where + ": \"attrs\" must be an array of integers");
        t.attrs.push_back(a.get<int64_t>());
      }
    }
    if (!t.attrs.empty() && !measuredOpHasAttrs(uint16_t(kernelOpIndex(t.op))))
      return fail(where + ": a " + t.op +
                  " call has no \"attrs\" (rp/timing/Measured.h, "
                  "measuredOpAttrs)");
    if (!o.contains("ms") || !o["ms"].is_number() || o["ms"].get<double>() < 0)
      return fail(where + ": \"ms\" must be a number of milliseconds, at "
                          "least 0");
    t.ms = o["ms"].get<double>();
    if (!o.contains("calls") || !o["calls"].is_number_integer() ||
        o["calls"].get<int64_t>() < 1)
      return fail(where + ": \"calls\" must be how many calls were timed, "
                          "at least 1");
    t.calls = o["calls"].get<uint64_t>();
    std::string key =
        measuredOpKey(t.op, t.dtype, t.inputs, t.outputs, t.attrs);
    if (times.ops.count(key))
      return fail(where + ": '" + key + "' is listed twice");
    times.ops[key] = std::move(t);
  }
  return times;
}

namespace {

/// How measuredOpAttrs picks a kind's attributes.
enum class Attrs { none, all, matmul, attention, reduce, strides, chunk };

Attrs attrsOf(uint16_t op) {
  using K = ::rp::plan::OpKind;
  switch (static_cast<K>(op)) {
  case K::matmul:
    return Attrs::matmul;
  case K::attention:
  case K::attention_grad:
    return Attrs::attention;
  case K::reduce:
  case K::extremum_grad:
    return Attrs::reduce;
  case K::slice:
  case K::slice_grad:
    return Attrs::strides;
  case K::linear_cross_entropy:
  case K::linear_cross_entropy_grad:
    return Attrs::chunk;
  case K::gelu:
  case K::transpose:
  case K::gather:
  case K::softmax:
  case K::log_softmax:
  case K::layer_norm:
  case K::rms_norm:
  case K::unary_grad:
  case K::softmax_grad:
  case K::norm_grad:
  case K::gather_grad:
  case K::moe_route:
  case K::moe_route_grad:
  case K::moe_grouped_matmul:
  case K::moe_grouped_matmul_wgrad:
  case K::moe_combine:
  case K::moe_combine_grad:
  case K::dequantize:
    return Attrs::all;
  default:
    return Attrs::none;
  }
}

} // namespace

std::vector<int64_t>
rp::timing::measuredOpAttrs(uint16_t op, const std::vector<int64_t> &ints,
                            const std::vector<double> &floats) {
  auto attr = [&](size_t i) { return i < ints.size() ? ints[i] : 0; };
  switch (attrsOf(op)) {
  case Attrs::none:
    return {};
  case Attrs::all:
    return ints;
  case Attrs::matmul: // transpose_a, transpose_b, (epilogue)
    return {attr(0), attr(1), attr(2)};
  case Attrs::attention: // causal, has_mask, (window), (has_sinks); softcap
    return {attr(0), attr(1), attr(2), attr(3),
            floats.size() > 1 && floats[1] != 0};
  case Attrs::reduce: { // kind, keep_dims, dims...
    std::vector<int64_t> attrs = {attr(0)};
    if (ints.size() > 2)
      attrs.insert(attrs.end(), ints.begin() + 2, ints.end());
    return attrs;
  }
  case Attrs::strides: // offsets, then strides: as many of each
    return {ints.begin() + ints.size() / 2, ints.end()};
  case Attrs::chunk: // ignore_index, chunk
    return {attr(1)};
  }
  return ints;
}

bool rp::timing::measuredOpHasAttrs(uint16_t op) {
  return attrsOf(op) != Attrs::none;
}

std::string
rp::timing::measuredOpKey(const std::string &op, const std::string &dtype,
                          const std::vector<std::vector<int64_t>> &inputs,
                          const std::vector<std::vector<int64_t>> &outputs,
                          const std::vector<int64_t> &attrs) {
  std::string key = op + " " + dtype;
  auto add = [&](const std::vector<int64_t> &list, const char *open,
                 const char *close) {
    key += open;
    for (size_t i = 0; i < list.size(); ++i)
      key += (i ? "," : "") + std::to_string(list[i]);
    key += close;
  };
  for (const auto &s : inputs)
    add(s, " [", "]");
  key += " ->";
  for (const auto &s : outputs)
    add(s, " [", "]");
  if (!attrs.empty())
    add(attrs, " {", "}");
  return key;
}

std::string rp::timing::measuredOpKey(uint16_t op, const CallOperands &call,
                                      const std::vector<int64_t> &ints,
                                      const std::vector<double> &floats) {
  std::vector<std::vector<int64_t>> in, out;
  for (const Operand &o : call.inputs)
    in.push_back(o.shape);
  for (const Operand &o : call.outputs)
    out.push_back(o.shape);
  return measuredOpKey(kernelOpName(op), call.dtype, in, out,
                       measuredOpAttrs(op, ints, floats));
}

std::optional<double> rp::timing::measuredCallMs(
    const MeasuredTimes *times, uint16_t op, const CallOperands &call,
    const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  if (!times || times->ops.empty())
    return std::nullopt;
  auto it = times->ops.find(measuredOpKey(op, call, ints, floats));
  if (it == times->ops.end())
    return std::nullopt;
  return it->second.ms;
}

double rp::timing::timedCallMs(const HardwareModel &hw,
                               const MeasuredTimes *measured, uint16_t op,
                               const CallOperands &call,
                               const std::vector<int64_t> &ints,
                               const std::vector<double> &floats) {
  if (std::optional<double> ms =
          measuredCallMs(measured, op, call, ints, floats))
    return *ms;
  return callMs(hw, op, call, ints);
}

std::optional<MeasuredTimes>
rp::timing::loadMeasuredTimes(const std::string &path, std::string &error) {
  std::string text;
  if (!readMeasuredProfile(path, text, error))
    return std::nullopt;
  return parseMeasuredTimes(text, path, error);
}

bool rp::timing::readMeasuredProfile(const std::string &path, std::string &text,
                                     std::string &error) {
  return rp::contract::readJsonFile(path, "measured profile",
                                    "the measured profile", text, error);
}

namespace {

/// `j` as dump(2) writes it, but an array of numbers on one line ([4,
/// 2048, 2048]): a large model's profile has thousands of shapes.
void writeJson(const nlohmann::ordered_json &j, int indent, std::string &out) {
  auto flat = [](const nlohmann::ordered_json &a) {
    for (const auto &e : a)
      if (e.is_structured())
        return false;
    return true;
  };
  std::string pad(size_t(indent + 2), ' ');
  if (j.is_array() && !j.empty() && flat(j)) {
    out += "[";
    for (size_t i = 0; i < j.size(); ++i)
      out += (i ? ", " : "") + j[i].dump();
    out += "]";
  } else if (j.is_structured() && !j.empty()) {
    out += j.is_object() ? "{\n" : "[\n";
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      out += (first ? "" : ",\n") + pad;
      first = false;
      if (j.is_object())
        out += nlohmann::ordered_json(it.key()).dump() + ": ";
      writeJson(*it, indent + 2, out);
    }
    out +=
        "\n" + std::string(size_t(indent), ' ') + (j.is_object() ? "}" : "]");
  } else {
    out += j.dump();
  }
}

} // namespace

std::string rp::timing::formatMeasuredTimes(const MeasuredTimes &times) {
  auto ms = [](double v) { return std::round(v * 1e6) / 1e6; };
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const std::string &name : times.order) {
    auto it = times.layers.find(name);
    if (it == times.layers.end())
      continue;
    const MeasuredLayerTimes &t = it->second;
    nlohmann::ordered_json entry = {{"name", name}};
    if (t.forwardMs >= 0)
      entry["forward_ms"] = ms(t.forwardMs);
    if (t.recomputeMs >= 0)
      entry["recompute_ms"] = ms(t.recomputeMs);
    if (t.backwardMs >= 0)
      entry["backward_ms"] = ms(t.backwardMs);
    list.push_back(std::move(entry));
  }
  nlohmann::ordered_json doc = {{"hw", times.hw}, {"note", times.note}};
  if (times.backwardIncludesAccumulation)
    doc["backward_includes_accumulation"] = true;
  doc["layers"] = std::move(list);
  if (!times.ops.empty()) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const auto &[key, t] : times.ops) {
      nlohmann::ordered_json entry = {{"op", t.op},
                                      {"dtype", t.dtype},
                                      {"inputs", t.inputs},
                                      {"outputs", t.outputs}};
      if (!t.attrs.empty())
        entry["attrs"] = t.attrs;
      entry["ms"] = ms(t.ms);
      entry["calls"] = t.calls;
      ops.push_back(std::move(entry));
    }
    doc["ops_format"] = kMeasuredOpsFormat;
    doc["ops"] = std::move(ops);
  }
  std::string text;
  writeJson(doc, 0, text);
  return text + "\n";
}

std::optional<double> rp::timing::measuredProgramMs(const MeasuredTimes &times,
                                                    const std::string &program,
                                                    bool tail) {
  std::string name = program;
  // Round-robin's buffer sets: "L slotN".
  size_t slot = name.rfind(" slot");
  if (slot != std::string::npos)
    name = name.substr(0, slot);
  // A job's gradient adds after a microbatch's backward: in the file's
  // backward times when it says so (and it times every layer they add
  // for), else the model's.
  const std::string adds = "add-grads ";
  if (name.rfind(adds, 0) == 0) {
    if (!times.backwardIncludesAccumulation)
      return std::nullopt;
    std::optional<double> covered =
        measuredProgramMs(times, name.substr(adds.size()), true);
    return covered ? std::optional<double>(0) : std::nullopt;
  }
  // A backward split after its recompute (docs/plan-format.md): its two
  // programs, "L.backward.recompute" and "L.backward.rest".
  auto strip = [&](const std::string &end) {
    bool has = name.size() > end.size() &&
               name.compare(name.size() - end.size(), end.size(), end) == 0;
    if (has)
      name = name.substr(0, name.size() - end.size());
    return has;
  };
  bool recomputePart = strip(".recompute"), restPart = strip(".rest");
  const std::string suffix = ".backward";
  bool backward =
      name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (backward)
    name = name.substr(0, name.size() - suffix.size());
  size_t dots = name.find("..");
  std::string first = dots == std::string::npos ? name : name.substr(0, dots);
  std::string last = dots == std::string::npos ? name : name.substr(dots + 2);
  size_t a = times.order.size(), b = times.order.size();
  for (size_t i = 0; i < times.order.size(); ++i) {
    if (times.order[i] == first)
      a = i;
    if (times.order[i] == last)
      b = i;
  }
  if (a == times.order.size() || b == times.order.size() || b < a)
    return std::nullopt;
  double ms = 0;
  for (size_t i = a; i <= b; ++i) {
    const MeasuredLayerTimes &t = times.layers.at(times.order[i]);
    double one = backward && recomputePart ? t.recomputeMs
                 : backward && restPart    ? t.backwardMs
                 : backward                ? t.recomputeMs + t.backwardMs
                 : tail                    ? t.forwardMs + t.backwardMs
                                           : t.recomputeMs;
    if ((backward || tail) && t.backwardMs < 0)
      return std::nullopt;
    if ((backward || !tail) ? t.recomputeMs < 0 : t.forwardMs < 0)
      return std::nullopt;
    ms += one;
  }
  return ms;
}
