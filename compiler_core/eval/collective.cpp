#include "eval/collective.hpp"

#include <algorithm>
#include <cstring>

#include "dist/world.hpp"
#include "ir/error.hpp"
#include "ir/op_attrs.gen.hpp"

namespace esg::eval {
namespace {

using K = ir::OpKind;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Elements before `axis` and bytes from it on, of `s` with the axis cut in `n` pieces.
void pieces(const ir::Shape& s, size_t axis, int n, size_t element, int64_t& outer, int64_t& piece) {
  outer = 1;
  for (size_t i = 0; i < axis; ++i) outer *= s[i];
  int64_t inner = static_cast<int64_t>(element);
  for (size_t i = axis + 1; i < s.rank(); ++i) inner *= s[i];
  piece = s[axis] / n * inner;
}

// [outer][n][piece] to [n][outer][piece] (pack) or back (unpack).
void regroup(const uint8_t* from, uint8_t* to, int64_t outer, int n, int64_t piece, bool pack) {
  for (int64_t p = 0; p < outer; ++p)
    for (int r = 0; r < n; ++r) {
      const int64_t a = (p * n + r) * piece, b = (static_cast<int64_t>(r) * outer + p) * piece;
      std::memcpy(to + (pack ? b : a), from + (pack ? a : b), static_cast<size_t>(piece));
    }
}

}  // namespace

Collective::Collective(const ir::Graph& g, ir::NodeId node) {
  const ir::Node& n = g.nodes[node];
  kind_ = n.op->kind;
  const bool has_input = n.num_inputs > 0;
  const ir::ValueId x = has_input ? g.operands[n.first_input] : ir::kNone, y = n.first_output;
  const ir::Shape in_shape = has_input ? g.shape(x) : ir::Shape{}, out_shape = g.shape(y);
  dtype_ = has_input ? g.values[x].dtype : g.values[y].dtype;
  const size_t element = ir::dtype_size(dtype_);
  std::vector<int64_t> listed;
  auto group_of = [&](ir::Span<int64_t> r) { listed.assign(r.begin(), r.end()); };
  std::string what = n.op->name;
  std::string detail;  // what the signature adds to the label
  size_t in_axis = 0, out_axis = 0;
  switch (kind_) {
    case K::all_reduce: {
      const ir::AllReduceAttrs a(g, n);
      reduce_ = static_cast<dist::Reduce>(a.op);
      group_of(a.ranks);
      break;
    }
    case K::all_gather: {
      const ir::AllGatherAttrs a(g, n);
      group_of(a.ranks);
      out_axis = a.axis;
      detail = " axis " + std::to_string(a.axis);
      break;
    }
    case K::reduce_scatter: {
      const ir::ReduceScatterAttrs a(g, n);
      reduce_ = static_cast<dist::Reduce>(a.op);
      group_of(a.ranks);
      in_axis = a.axis;
      detail = " axis " + std::to_string(a.axis);
      break;
    }
    case K::broadcast: {
      const ir::BroadcastAttrs a(g, n);
      group_of(a.ranks);
      root_ = static_cast<int>(a.root);
      detail = " from rank " + std::to_string(a.root);
      break;
    }
    case K::all_to_all: {
      const ir::AllToAllAttrs a(g, n);
      group_of(a.ranks);
      in_axis = a.split_axis;
      out_axis = a.concat_axis;
      detail = " split axis " + std::to_string(a.split_axis) + " concat axis " + std::to_string(a.concat_axis);
      break;
    }
    case K::send: peer_ = static_cast<int>(ir::SendAttrs(g, n).peer); break;
    case K::recv: peer_ = static_cast<int>(ir::RecvAttrs(g, n).peer); break;
    default: throw ir::Error(ir::ErrorCode::Internal, std::string(n.op->name) + " is not a collective");
  }
  dist::World& world = dist::world();
  ranks_.assign(listed.begin(), listed.end());
  if (ranks_.empty())
    for (int r = 0; r < world.size(); ++r) ranks_.push_back(r);
  const int size = static_cast<int>(ranks_.size());
  if (kind_ == K::broadcast) root_ = static_cast<int>(std::find(ranks_.begin(), ranks_.end(), root_) - ranks_.begin());
  if (kind_ == K::all_reduce || kind_ == K::reduce_scatter) what += std::string(" ") + dist::reduce_name(reduce_);
  const ir::Shape& shown = has_input ? in_shape : out_shape;
  what += std::string(" ") + ir::dtype_name(dtype_) + g.shape_str(shown) + detail;
  // The signature every member hashes alike: a send from a to b as b's recv from a.
  const int me = world.rank();
  std::string signed_as;
  if (kind_ == K::send || kind_ == K::recv) {
    const int from = kind_ == K::send ? me : peer_, to = kind_ == K::send ? peer_ : me;
    signed_as = "p2p " + std::to_string(from) + ">" + std::to_string(to) + " " + ir::dtype_name(dtype_) + g.shape_str(shown);
    label_ = what + (kind_ == K::send ? " to rank " : " from rank ") + std::to_string(peer_);
  } else {
    signed_as = what + " over " + dist::ranks_str(ranks_);
    label_ = signed_as;
  }
  label_ += " (node '" + g.node_name(node) + "')";
  signature_ = fnv1a(signed_as);
  bytes_ = static_cast<int64_t>(has_input ? in_shape.num_elements() * static_cast<int64_t>(element)
                                          : out_shape.num_elements() * static_cast<int64_t>(element));
  count_ = kind_ == K::reduce_scatter ? out_shape.num_elements() : in_shape.num_elements();
  if (kind_ == K::reduce_scatter || kind_ == K::all_to_all) pieces(in_shape, in_axis, size, element, in_outer_, in_piece_);
  if (kind_ == K::all_gather || kind_ == K::all_to_all) pieces(out_shape, out_axis, size, element, out_outer_, out_piece_);
  if (in_outer_ > 1) send_scratch_.resize(static_cast<size_t>(bytes_));
  if (out_outer_ > 1) recv_scratch_.resize(static_cast<size_t>(out_shape.num_elements()) * element);
}

void Collective::run(const TensorRef* in, const TensorRef& out) const {
  try {
    transfer(in, out);
  } catch (const dist::Error& e) {
    throw ir::Error(ir::ErrorCode::Communication, e.what());
  }
}

dist::Communicator& Collective::communicator() const {
  if (dist::Communicator* made = made_.load(std::memory_order_acquire)) return *made;
  std::lock_guard<std::mutex> lock(mu_);
  if (!comm_) {
    comm_ = dist::world().group(ranks_);
    made_.store(comm_.get(), std::memory_order_release);
  }
  return *comm_;
}

void Collective::transfer(const TensorRef* in, const TensorRef& out) const {
  dist::Communicator& comm = communicator();
  const dist::Call call{label_, dist::collective_timeout_ms()};
  const int n = comm.size();
  // Pieces along a later axis go through the scratch, one call at a time; contiguous ones
  // straight from and to the tensors, with no lock of this collective's (a small call's
  // time is mostly such costs).
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (in_outer_ > 1 || out_outer_ > 1) lock.lock();
  // What the transport reads: the input, or its pieces packed group-major.
  const uint8_t* source = in ? in->bytes : nullptr;
  if (in && in_outer_ > 1) {
    regroup(in->bytes, send_scratch_.data(), in_outer_, n, in_piece_, true);
    source = send_scratch_.data();
  }
  uint8_t* target = out_outer_ > 1 ? recv_scratch_.data() : out.bytes;
  switch (kind_) {
    case K::all_reduce: comm.all_reduce(source, target, count_, dtype_, reduce_, call); break;
    case K::all_gather: comm.all_gather(source, target, bytes_, call); break;
    case K::reduce_scatter: comm.reduce_scatter(source, target, count_, dtype_, reduce_, call); break;
    case K::broadcast:
      if (source != target) std::memcpy(target, source, static_cast<size_t>(bytes_));
      comm.broadcast(target, bytes_, root_, call);
      break;
    case K::all_to_all: comm.all_to_all(source, target, bytes_ / n, call); break;
    case K::send:
      comm.send(source, bytes_, peer_, call);
      *out.bytes = 0;  // the token
      break;
    case K::recv: comm.recv(target, bytes_, peer_, call); break;
    default: break;
  }
  if (out_outer_ > 1) regroup(recv_scratch_.data(), out.bytes, out_outer_, n, out_piece_, false);
}

void run_collective(const ir::Graph& g, const ir::Node& n, const TensorRef* in, const TensorRef& out) {
  Collective(g, static_cast<ir::NodeId>(&n - g.nodes.data())).run(in, out);
}

}  // namespace esg::eval
