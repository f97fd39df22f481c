// A collective (op_defs/collective.yaml) as one HCCL call: whether HCCL can run it, by CANN's
// argument rules for Atlas A2 (docs/ascend.md), and the call's arguments at a binding's sizes.
// HCCL moves whole pieces in rank order, so a gather, scatter or all-to-all whose pieces do not
// lie whole along its axis is refused (the CPU packs those; host_fallback runs them there).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ascend/hccl_api.hpp"
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
  uint64_t bytes = 0;  // the result's (a broadcast starts from a copy of the input there)
};

// The HCCL function a collective runs as ("HcclAllReduce").
const char* hccl_function(ir::OpKind kind);

// The call for `n` (one hccl_refusal accepts) at `g`'s sizes, in the group of world ranks
// `ranks` (in the group's order; a send's or receive's group is the world).
HcclCall hccl_call(const ir::Graph& g, const ir::Node& n, const std::vector<int>& ranks);

}  // namespace esg::ascend
