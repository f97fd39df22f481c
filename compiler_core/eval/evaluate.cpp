#include "eval/evaluate.hpp"

#include <cstring>
#include <string>
#include <unordered_map>

#include "eval/elementwise.hpp"
#include "eval/kernels.hpp"
#include "eval/run_cut.hpp"
#include "ir/builder.hpp"
#include "ir/error.hpp"
#include "ir/replay.hpp"

namespace esg::eval {
namespace {

using ir::Graph;
using ir::kNone;
using ir::NodeId;
using ir::RegionId;
using ir::ValueId;

// A condition's one element (an if's operand, a while's cond result). An empty or longer one
// is refused, never read past (a bool[0] condition of a hostile model read beyond its buffer).
bool condition(const HostTensor& t, const char* op) {
  if (t.size() != 1)
    throw ir::Error(ir::ErrorCode::InvalidArgument, std::string("`") + op + "`: its condition has " + std::to_string(t.size()) +
                                                        " elements; it must have exactly one");
  return load_i(t, 0) != 0;
}

// Runs a specialized graph's regions over tensors held by value id.
class Runner {
 public:
  Runner(const Graph& g, const RunControl& control) : g_(g), control_(control) {}
  std::unordered_map<ValueId, HostTensor> env;

  void region(RegionId r) {
    for (NodeId n : g_.regions[r].nodes) node(n);
  }
  void node(NodeId id);

 private:
  const HostTensor& at(ValueId v) const {
    const auto it = env.find(v);
    if (it == env.end()) throw ir::Error(ir::ErrorCode::Internal, "evaluate: value " + g_.value_name(v) + " was not computed");
    return it->second;
  }

  // Binds a body's parameters and captures, runs it, and returns its results.
  std::vector<HostTensor> body(RegionId r, const std::vector<HostTensor>& params) {
    const ir::Region& reg = g_.regions[r];
    for (size_t i = 0; i < reg.params.size(); ++i) env[reg.params[i]] = params[i];
    for (size_t i = 0; i < reg.captures_inner.size(); ++i) env[reg.captures_inner[i]] = at(reg.captures_outer[i]);
    region(r);
    std::vector<HostTensor> out;
    for (ValueId v : reg.results) out.push_back(at(v));
    return out;
  }

  const Graph& g_;
  const RunControl& control_;
};

void Runner::node(NodeId id) {
  const ir::Node& n = g_.nodes[id];
  const ir::OpSchema& op = *n.op;
  if (n.blob != kNone) {
    HostTensor t(g_.values[n.first_output].dtype, g_.shape(n.first_output));
    t.bytes.assign(g_.blobs[n.blob]->begin(), g_.blobs[n.blob]->end());
    env[n.first_output] = std::move(t);
    return;
  }
  const uint32_t declared = n.num_inputs - n.num_captures;
  if (op.subgraphs.size()) {
    std::vector<HostTensor> outs;
    if (op.kind == ir::OpKind::if_) {
      outs = body(g_.bodies(n)[condition(at(g_.operands[n.first_input]), op.name) ? 0 : 1], {});
    } else {  // while
      for (uint32_t i = 0; i < declared; ++i) outs.push_back(at(g_.operands[n.first_input + i]));
      for (;;) {
        if (!condition(body(g_.bodies(n)[0], outs)[0], op.name)) break;
        control_.check_iteration(op.name);
        outs = body(g_.bodies(n)[1], outs);
      }
    }
    for (uint32_t i = 0; i < n.num_outputs; ++i) env[n.first_output + i] = outs[i];
    return;
  }
  // Refs to the inputs and to freshly allocated outputs (refs stay valid: env is a node map).
  std::vector<TensorRef> in_refs(declared), out_refs(n.num_outputs);
  std::vector<const TensorRef*> in(declared, nullptr), out;
  for (uint32_t i = 0; i < declared; ++i) {
    const ValueId v = g_.operands[n.first_input + i];
    if (v == kNone) continue;
    in_refs[i] = at(v).ref();
    in[i] = &in_refs[i];
  }
  for (uint32_t i = 0; i < n.num_outputs; ++i) {
    const ValueId v = n.first_output + i;
    const ir::Shape s = g_.shape(v);
    if (!s.is_static()) throw ir::Error(ir::ErrorCode::Unsupported, "evaluate: " + g_.value_name(v) + " has no concrete shape");
    env[v] = HostTensor(g_.values[v].dtype, s);
  }
  for (uint32_t i = 0; i < n.num_outputs; ++i) out_refs[i] = env[n.first_output + i].ref();
  for (const TensorRef& r : out_refs) out.push_back(&r);
  run_kernel(g_, n, in, out);
}

}  // namespace

void run_kernel(const Graph& g, const ir::Node& n, const std::vector<const TensorRef*>& in,
                const std::vector<const TensorRef*>& out) {
  const ir::OpSchema& op = *n.op;
  if (const ElementwiseFn* ew = find_elementwise(op)) {
    double attrs[kMaxElementwiseAttrs];
    for (size_t i = 0; i < op.attrs.size(); ++i) {
      const ir::AttrValue& a = g.attrs[n.first_attr + i];
      attrs[i] = a.kind == ir::AttrKind::Float ? a.f : static_cast<double>(a.i);
    }
    run_elementwise(*ew, in, attrs, *out[0]);
    return;
  }
  const Kernel k = find_kernel(op);
  if (!k) throw ir::Error(ir::ErrorCode::Unsupported, std::string("no kernel for `") + op.name + "`");
  k(KernelCall{g, n, in, out});
}

void run_control_flow(const Graph& g, NodeId id, const std::vector<const TensorRef*>& inputs,
                      const std::vector<const TensorRef*>& out, const RunControl& control) {
  const ir::Node& n = g.nodes[id];
  Runner run(g, control);
  for (uint32_t i = 0; i < n.num_inputs; ++i)
    if (g.operands[n.first_input + i] != kNone) run.env[g.operands[n.first_input + i]] = HostTensor(*inputs[i]);
  run.node(id);
  for (uint32_t i = 0; i < n.num_outputs; ++i) {
    const HostTensor& r = run.env.at(n.first_output + i);
    if (r.shape != out[i]->shape)
      throw ir::Error(ir::ErrorCode::Shape, "`" + std::string(n.op->name) + "` produced " + g.shape_str(r.shape) + " where " +
                                                g.shape_str(out[i]->shape) + " was planned");
    move_bytes(out[i]->bytes, r.bytes.data(), r.bytes.size());
  }
}

std::unique_ptr<Graph> specialize(const Graph& g, const std::vector<ir::Shape>& input_shapes) {
  if (input_shapes.size() != g.inputs().size())
    throw ir::Error(ir::ErrorCode::InvalidArgument, "the graph takes " + std::to_string(g.inputs().size()) +
                                                        " input(s), got " + std::to_string(input_shapes.size()));
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    const ValueId v = g.inputs()[i];
    const ir::Shape want = g.shape(v);
    const ir::Shape& got = input_shapes[i];
    bool fits = want.rank() == got.rank();
    for (size_t d = 0; fits && d < got.rank(); ++d) fits = ir::dim_is_symbolic(want[d]) || want[d] == got[d];
    if (!fits)
      throw ir::Error(ir::ErrorCode::Shape, "input " + g.value_name(v) + " is " + g.shape_str(want) + ", got " + g.shape_str(got));
  }
  return ir::rebuild(g, &input_shapes);
}

std::vector<HostTensor> evaluate(const Graph& g, const std::vector<HostTensor>& inputs, const RunControl& control) {
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < g.inputs().size() && inputs[i].dtype != g.values[g.inputs()[i]].dtype)
      throw ir::Error(ir::ErrorCode::DType, "input " + g.value_name(g.inputs()[i]) + " is " +
                                                ir::dtype_name(g.values[g.inputs()[i]].dtype) + ", got " + ir::dtype_name(inputs[i].dtype));
    shapes.push_back(inputs[i].shape);
  }
  const std::unique_ptr<Graph> spec = specialize(g, shapes);
  if (ir::has_sized_by_data(*spec)) {
    // Stage by stage: each evaluated at the sizes the ops before it found.
    const ir::Cut cut = ir::cut_at_sized_by_data(*spec);
    std::vector<TensorRef> refs;
    for (const HostTensor& t : inputs) refs.push_back(t.ref());
    return run_cut(*spec, cut, refs, [&](size_t k, const std::vector<TensorRef>& in) {
      return evaluate(*cut.stages[k].graph, std::vector<HostTensor>(in.begin(), in.end()), control);
    }, control);
  }
  Runner run(*spec, control);
  for (size_t i = 0; i < inputs.size(); ++i) run.env[spec->inputs()[i]] = inputs[i];
  run.region(0);
  std::vector<HostTensor> out;
  for (ValueId v : spec->outputs()) out.push_back(run.env.at(v));
  return out;
}

}  // namespace esg::eval
