// One graph op run through CANN's operator library: its aclnn descriptors, made once when the
// device program is built (the operands' device addresses are fixed by then), and the two
// phases of each run: plan (workspace size and executor) and queue on a stream. What each op
// becomes is its entry in aclnn_lowerings.cpp.
#pragma once
#include <string>
#include <vector>

#include "ascend/aclnn_library.hpp"
#include "ascend/aclnn_lowerings.hpp"
#include "ir/graph.hpp"

namespace esg::ascend {

class AclnnCall {
 public:
  // Why the op cannot go through aclnn (empty when it can): which ops, dtypes and attributes
  // have a mapping.
  static std::string unsupported(const ir::Graph& g, const ir::Node& n);
  // The ops it maps, listed for messages.
  static std::string mapped_ops();
  // The constants the op's lowering computes from the node's own (scales combined, a dummy scale
  // CANN requires), which the device program uploads once beside the graph's; their device
  // addresses, in this order, go to the constructor.
  static std::vector<eval::HostTensor> constants(const ir::Graph& g, const ir::Node& n);
  // Whether the op's lowering never reads input `i` (its own constants stand for it).
  static bool reads(const ir::Node& n, uint32_t i);

  // `in` and `out`: device addresses of the node's inputs (nullptr for an absent optional one)
  // and outputs; `soc`: the device's (aclrtGetSocName), for choices that differ by product.
  AclnnCall(const AclnnLibrary& lib, const ir::Graph& g, const ir::Node& n, const std::vector<void*>& in,
            const std::vector<void*>& out, const std::vector<void*>& constants, const std::string& soc);
  ~AclnnCall();
  AclnnCall(const AclnnCall&) = delete;
  AclnnCall& operator=(const AclnnCall&) = delete;

  aclnn::Executor* plan(uint64_t* workspace_bytes) const;
  void queue(void* workspace, uint64_t workspace_bytes, aclnn::Executor* executor, acl::Stream stream) const;
  const char* name() const { return step_.name; }

 private:
  const AclnnLibrary& lib_;
  AclnnDescriptors descriptors_;  // what step_'s arguments point at
  AclnnStep step_;
};

}  // namespace esg::ascend
