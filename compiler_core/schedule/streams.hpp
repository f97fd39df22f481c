// Streams and events: which stream runs each op, and the events that order ops across streams.
// An op depending on an op of another stream needs an event unless what that stream already
// waited for implies it (vector clocks: the transitive reduction of the cross-stream edges
// given each stream's order), so there are no redundant and no missing events.
#pragma once
#include <vector>

#include "schedule/dag.hpp"

namespace esg::schedule {

struct Event {
  int after;   // the op recorded after
  int before;  // the op that waits before it runs
};

struct StreamPlan {
  int num_streams = 1;
  int communication_stream = -1;  // the stream of the collectives, the last one; -1: none
  std::vector<int> stream;                 // per op
  std::vector<std::vector<int>> sequence;  // per stream: its ops in order
  std::vector<Event> events;
};

// Assigns `order` to up to `num_streams` streams: an op continues the stream of an input's
// producer when that producer is the stream's last op (no event needed), else starts on the
// stream that has run the fewest ops; then places the events. Ops marked in `communicates` (the
// collectives) run on a stream of their own after those, in `order`, so that compute that does
// not need them overlaps with them.
StreamPlan assign_streams(const Dag& d, const std::vector<int>& order, int num_streams,
                          const std::vector<char>& communicates = {});

// The events a given assignment needs (used by assign_streams; public for tests).
std::vector<Event> place_events(const Dag& d, const std::vector<int>& order, const std::vector<int>& stream, int num_streams);

}  // namespace esg::schedule
