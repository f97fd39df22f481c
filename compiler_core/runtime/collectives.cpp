#include "runtime/collectives.hpp"

#include <algorithm>
#include <map>

#include "dist/world.hpp"
#include "ir/error.hpp"
#include "runtime/plan.hpp"

namespace esg::runtime {
namespace {

using K = ir::OpKind;
constexpr size_t kShown = 30;  // signatures compared one by one; past them only the hash of all

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull + (h >> 29); }

bool point_to_point(const eval::Collective& c) { return c.kind() == K::send || c.kind() == K::recv; }

// What two sides compare of a list of hashes: how many, the hash of all, and the first kShown.
std::vector<uint64_t> summary_of(const std::vector<uint64_t>& hashes) {
  std::vector<uint64_t> v(2 + kShown, 0);
  v[0] = hashes.size();
  for (size_t i = 0; i < hashes.size(); ++i) {
    v[1] = mix(v[1], hashes[i]);
    if (i < kShown) v[2 + i] = hashes[i];
  }
  return v;
}

std::vector<uint64_t> summary(const std::vector<const eval::Collective*>& calls) {
  std::vector<uint64_t> hashes;
  for (const eval::Collective* c : calls) hashes.push_back(c->signature());
  return summary_of(hashes);
}

// The members' summaries, all alike, or an error naming the first difference.
void check_group(const std::vector<int>& ranks, const std::vector<const eval::Collective*>& calls) {
  dist::Communicator& comm = calls.front()->communicator();
  const std::string label = "the check before the first run of the " + std::to_string(calls.size()) + " collectives over " + dist::ranks_str(ranks) +
                            " (the first: " + calls.front()->label() + ")";
  const std::vector<uint64_t> mine = summary(calls);
  const std::vector<uint64_t> all = comm.exchange(mine, {label, dist::collective_timeout_ms()});
  for (int m = 0; m < comm.size(); ++m) {
    const uint64_t* theirs = all.data() + static_cast<size_t>(m) * mine.size();
    if (std::equal(mine.begin(), mine.end(), theirs)) continue;
    size_t first = 0;
    while (first < kShown && first < calls.size() && theirs[2 + first] == mine[2 + first]) ++first;
    const std::string here = first >= kShown            ? "; they differ past the first " + std::to_string(kShown)
                             : first < calls.size()      ? "; the first that differs is #" + std::to_string(first) + ", here " + calls[first]->label()
                                                         : "; this rank's end before #" + std::to_string(first);
    throw ir::Error(ir::ErrorCode::Communication,
                    "ranks build different collectives over " + dist::ranks_str(ranks) + ": rank " + std::to_string(dist::world().rank()) + " runs " +
                        std::to_string(calls.size()) + ", rank " + std::to_string(ranks[static_cast<size_t>(m)]) + " runs " +
                        std::to_string(theirs[0]) + here + " (every rank must build the same collectives, shapes and dtypes, in the same order)");
  }
}

// Each pair of peers compares what passes between them, in order: this rank's sends and
// receives with the peer against the peer's, mirrored (a send here is a receive there). HCCL's
// sends are synchronous, so the order matters as much as the shapes.
void check_pairs(const std::vector<const eval::Collective*>& calls) {
  std::map<int, std::vector<const eval::Collective*>> with;  // by peer, in plan order
  for (const eval::Collective* c : calls) with[c->peer()].push_back(c);
  dist::Communicator& comm = calls.front()->communicator();
  const int me = dist::world().rank();
  for (const auto& [peer, list] : with) {
    // Each entry: the signature (alike at both ends), and which way it goes.
    std::vector<uint64_t> mine, mirrored;
    for (const eval::Collective* c : list) {
      const bool sends = c->kind() == K::send;
      mine.push_back(mix(c->signature(), sends ? 1 : 2));
      mirrored.push_back(mix(c->signature(), sends ? 2 : 1));
    }
    std::vector<uint64_t> ours = summary_of(mine), expected = summary_of(mirrored);
    const std::string label = "the check before the first run of the sends and receives between ranks " + std::to_string(me) + " and " +
                              std::to_string(peer) + " (the first: " + list.front()->label() + ")";
    const std::vector<uint64_t> theirs = comm.swap(ours, peer, {label, dist::collective_timeout_ms()});
    if (theirs == expected) continue;
    size_t first = 0;
    while (first < kShown && first < list.size() && theirs[2 + first] == expected[2 + first]) ++first;
    throw ir::Error(ir::ErrorCode::Communication,
                    "the sends and receives between ranks " + std::to_string(me) + " and " + std::to_string(peer) + " do not pair up: rank " +
                        std::to_string(me) + " has " + std::to_string(list.size()) + ", rank " + std::to_string(peer) + " " +
                        std::to_string(theirs[0]) +
                        (first < list.size() && first < kShown ? "; #" + std::to_string(first) + " here is " + list[first]->label() +
                                                                     ", and the peer's is not the matching " +
                                                                     (list[first]->kind() == K::send ? "recv" : "send")
                                                               : std::string()) +
                        " (each send needs the peer's recv of the same shape and dtype at the same point of both graphs)");
  }
}

}  // namespace

PlanCollectives::PlanCollectives(const Plan& plan) {
  const ir::Graph& g = plan.symbolic() ? plan.largest_graph() : plan.graph();  // a symbolic plan's is reported at its largest
  by_launch_.assign(plan.launches().size(), -1);
  for (size_t i = 0; i < plan.launches().size(); ++i) {
    const Plan::Launch& l = plan.launches()[i];
    if (l.node == ir::kNone || l.group >= 0 || !g.nodes[l.node].op->communicates) continue;
    by_launch_[i] = static_cast<int>(entries_.size());
    entries_.push_back({i, std::make_shared<const eval::Collective>(g, l.node)});
  }
  communicates_ = std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) { return n.op->communicates; });
}

void PlanCollectives::agree() const {
  if (agreed_.load(std::memory_order_acquire)) return;  // every run asks: the check is made once
  std::lock_guard<std::mutex> lock(mu_);
  if (agreed_.load() || entries_.empty()) return;
  std::map<std::vector<int>, std::vector<const eval::Collective*>> groups;
  std::vector<const eval::Collective*> pairs;
  for (const Entry& e : entries_) (point_to_point(*e.call) ? pairs : groups[e.call->ranks()]).push_back(e.call.get());
  try {
    for (const auto& [ranks, calls] : groups) check_group(ranks, calls);
    if (!pairs.empty()) check_pairs(pairs);
  } catch (const dist::Error& e) {
    throw ir::Error(ir::ErrorCode::Communication, e.what());
  }
  agreed_.store(true, std::memory_order_release);
}

void PlanCollectives::add_facts(const Plan& plan, Facts& f) const {
  f.count("collectives", static_cast<int64_t>(entries_.size()));
  int64_t bytes = 0;
  for (const Entry& e : entries_) bytes += e.call->bytes();
  f.bytes("collective_bytes", bytes);  // what this rank gives them, each tensor once
  if (entries_.empty()) return;
  // What each launch comes after (its stream's earlier launches, the events it waits for, and
  // theirs): a compute launch neither before nor after a collective may run beside it.
  const size_t n = plan.launches().size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));
  std::vector<int> previous(n, -1);
  for (const std::vector<int>& stream : plan.stream_launches())
    for (size_t k = 1; k < stream.size(); ++k) previous[static_cast<size_t>(stream[k])] = stream[k - 1];
  for (size_t i = 0; i < n; ++i) {  // the launch list is in dependency order
    std::vector<int> direct = plan.waits()[i];
    if (previous[i] >= 0) direct.push_back(previous[i]);
    for (int p : direct) {
      before[i][static_cast<size_t>(p)] = true;
      for (size_t k = 0; k < n; ++k)
        if (before[static_cast<size_t>(p)][k]) before[i][k] = true;
    }
  }
  const ir::Graph& g = plan.graph();
  f.text("collective_transport", dist::world().transport());
  f.level("world_size", dist::world().size());
  for (const Entry& e : entries_) {
    std::vector<std::string> beside;
    for (size_t k = 0; k < n; ++k) {
      const Plan::Launch& l = plan.launches()[k];
      if (k == e.launch || l.stream == plan.launches()[e.launch].stream || before[e.launch][k] || before[k][e.launch]) continue;
      beside.push_back(l.node == ir::kNone ? "reorder" : g.node_name(l.node));
    }
    std::string overlaps;  // nothing: all compute needs it or comes before it
    for (size_t k = 0; k < beside.size() && k < 4; ++k) overlaps += (k ? ", " : "") + beside[k];
    if (beside.size() > 4) overlaps += " and " + std::to_string(beside.size() - 4) + " more launches";
    Facts& row = f.row("collective_calls");
    row.text("call", e.call->label());
    row.level("stream", plan.launches()[e.launch].stream);
    row.bytes("bytes", e.call->bytes());
    row.count("overlapping_launches", static_cast<int64_t>(beside.size()));
    row.text("overlaps", overlaps.empty() ? "nothing" : overlaps);
  }
}

}  // namespace esg::runtime
