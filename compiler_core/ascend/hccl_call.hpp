// A collective (op_defs/collective.yaml) as one HCCL call: whether HCCL can run it, by CANN's
// argument rules for Atlas A2 (docs/ascend.md), and the call's arguments at a binding's sizes.
// HCCL moves whole pieces in rank order, so a gather, scatter or all-to-all whose pieces do not
// lie whole along its axis is refused (the CPU packs those; host_fallback runs them there).
#pragma once
#include <cstdint>
#include <string>

#include "ascend/hccl_api.hpp"
#include "eval/collective.hpp"
#include "ir/graph.hpp"

namespace esg::ascend {

// Why HCCL cannot run collective `n`; empty when it can.
std::string hccl_refusal(const ir::Graph& g, const ir::Node& n);

struct HcclCall {
  ir::OpKind kind;
  hccl::DataType type = hccl::kFp32;
  hccl::ReduceOp op = hccl::kSum;
  uint64_t count = 0;  // elements: AllReduce's, AllGather's sent, ReduceScatter's received, AlltoAll's per rank, ...
  uint32_t rank = 0;   // Broadcast's root, Send's destination, Recv's source: places in the communicator
  uint64_t bytes = 0;  // a broadcast's tensor (it starts from a copy of the input in the result)
};

// The HCCL function a collective runs as ("HcclAllReduce").
const char* hccl_function(ir::OpKind kind);

// The call for a collective hccl_refusal accepts, from its binding at a plan's sizes.
HcclCall hccl_call(const eval::Collective& collective);

}  // namespace esg::ascend
