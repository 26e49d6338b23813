//===- Measured.cpp - measured per-layer times applied to programs --------===//

#include "rp/timing/Measured.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using namespace rp::timing;

std::optional<MeasuredTimes>
rp::timing::parseMeasuredTimes(const std::string &text,
                               const std::string &source, std::string &error) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto fail = [&](const std::string &what) {
    error = "measured profile '" + source + "': " + what;
    return std::nullopt;
  };
  if (j.is_discarded())
    return fail("not valid JSON");
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return fail("expected an object with a \"layers\" array");
  MeasuredTimes times;
  if (j.contains("hw") && j["hw"].is_string())
    times.hw = j["hw"].get<std::string>();
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json &l = j["layers"][i];
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
  return times;
}

std::optional<MeasuredTimes>
rp::timing::loadMeasuredTimes(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = "cannot read the measured profile '" + path + "'";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseMeasuredTimes(text.str(), path, error);
}

std::optional<double> rp::timing::measuredProgramMs(const MeasuredTimes &times,
                                                    const std::string &program,
                                                    bool tail) {
  std::string name = program;
  // Round-robin's buffer sets: "L slotN".
  size_t slot = name.rfind(" slot");
  if (slot != std::string::npos)
    name = name.substr(0, slot);
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
    double one = backward ? t.recomputeMs + t.backwardMs
                 : tail   ? t.forwardMs + t.backwardMs
                          : t.recomputeMs;
    if ((backward || tail) && t.backwardMs < 0)
      return std::nullopt;
    if ((backward || !tail) ? t.recomputeMs < 0 : t.forwardMs < 0)
      return std::nullopt;
    ms += one;
  }
  return ms;
}
