#include "schedule/streams.hpp"

#include <algorithm>

namespace esg::schedule {
namespace {

// Distinct producing ops of an op's inputs.
std::vector<int> predecessors(const Dag& d, const std::vector<int>& prod, int op) {
  std::vector<int> p;
  for (int v : d.ops[static_cast<size_t>(op)].inputs)
    if (prod[static_cast<size_t>(v)] >= 0) p.push_back(prod[static_cast<size_t>(v)]);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

}  // namespace

std::vector<Event> place_events(const Dag& d, const std::vector<int>& order, const std::vector<int>& stream, int num_streams) {
  const auto prod = d.producers();
  const size_t ns = static_cast<size_t>(num_streams);
  // clock[s][t]: how many ops of stream t are known done at stream s's current point.
  std::vector<std::vector<int>> clock(ns, std::vector<int>(ns, 0));
  std::vector<std::vector<int>> clock_after(static_cast<size_t>(d.num_ops()));  // stream's clock right after op
  std::vector<int> index(static_cast<size_t>(d.num_ops()), 0);                   // position in its stream
  std::vector<Event> events;
  for (int op : order) {
    const size_t s = static_cast<size_t>(stream[static_cast<size_t>(op)]);
    // Cross-stream dependencies the stream does not already know to be done…
    std::vector<int> needed;
    for (int u : predecessors(d, prod, op)) {
      const size_t su = static_cast<size_t>(stream[static_cast<size_t>(u)]);
      if (su != s && clock[s][su] <= index[static_cast<size_t>(u)]) needed.push_back(u);
    }
    // …less those another needed dependency's clock already covers.
    std::vector<int> waits;
    for (int u : needed) {
      const size_t su = static_cast<size_t>(stream[static_cast<size_t>(u)]);
      bool covered = false;
      for (int w : needed)
        covered = covered || (w != u && clock_after[static_cast<size_t>(w)][su] > index[static_cast<size_t>(u)]);
      if (!covered) waits.push_back(u);
    }
    for (int u : waits) {
      events.push_back({u, op});
      for (size_t t = 0; t < ns; ++t) clock[s][t] = std::max(clock[s][t], clock_after[static_cast<size_t>(u)][t]);
    }
    index[static_cast<size_t>(op)] = clock[s][s];
    clock[s][s] += 1;
    clock_after[static_cast<size_t>(op)] = clock[s];
  }
  return events;
}

StreamPlan assign_streams(const Dag& d, const std::vector<int>& order, int num_streams, const std::vector<char>& communicates) {
  StreamPlan plan;
  const int compute = std::max(1, num_streams);
  const bool any_communicates = std::find(communicates.begin(), communicates.end(), 1) != communicates.end();
  plan.num_streams = compute + (any_communicates ? 1 : 0);
  plan.communication_stream = any_communicates ? compute : -1;
  const size_t ns = static_cast<size_t>(compute);
  const auto prod = d.producers();
  plan.stream.assign(static_cast<size_t>(d.num_ops()), 0);
  plan.sequence.assign(static_cast<size_t>(plan.num_streams), {});
  for (int op : order) {
    int chosen = -1;
    if (any_communicates && communicates[static_cast<size_t>(op)]) chosen = plan.communication_stream;
    for (int u : chosen < 0 ? predecessors(d, prod, op) : std::vector<int>{}) {
      const int su = plan.stream[static_cast<size_t>(u)];
      if (su != plan.communication_stream && !plan.sequence[static_cast<size_t>(su)].empty() && plan.sequence[static_cast<size_t>(su)].back() == u) {
        chosen = su;
        break;
      }
    }
    if (chosen < 0) {
      chosen = 0;
      for (size_t s = 1; s < ns; ++s)
        if (plan.sequence[s].size() < plan.sequence[static_cast<size_t>(chosen)].size()) chosen = static_cast<int>(s);
    }
    plan.stream[static_cast<size_t>(op)] = chosen;
    plan.sequence[static_cast<size_t>(chosen)].push_back(op);
  }
  plan.events = place_events(d, order, plan.stream, plan.num_streams);
  return plan;
}

}  // namespace esg::schedule
