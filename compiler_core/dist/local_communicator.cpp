#include "dist/local_communicator.hpp"

#include <cstring>

namespace esg::dist {
namespace {

void copy(const void* in, void* out, int64_t bytes) {
  if (in != out && bytes > 0) std::memmove(out, in, static_cast<size_t>(bytes));
}

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(int world_rank) : Communicator({world_rank}, 0) {}
  // A sum, maximum, ... or average over one rank is that rank's value.
  void all_reduce(const void* in, void* out, int64_t count, ir::DType type, Reduce, const Call&) override {
    copy(in, out, count * static_cast<int64_t>(ir::dtype_size(type)));
  }
  void all_gather(const void* in, void* out, int64_t bytes, const Call&) override { copy(in, out, bytes); }
  void reduce_scatter(const void* in, void* out, int64_t count, ir::DType type, Reduce, const Call&) override {
    copy(in, out, count * static_cast<int64_t>(ir::dtype_size(type)));
  }
  void broadcast(void*, int64_t, int, const Call&) override {}
  void all_to_all(const void* in, void* out, int64_t bytes, const Call&) override { copy(in, out, bytes); }
  // The ops' rules refuse a peer that is the process itself, and a world of one has no other.
  void send(const void*, int64_t, int, const Call& c) override { throw Error(c.label + ": a world of one process has no peer to send to"); }
  void recv(void*, int64_t, int, const Call& c) override { throw Error(c.label + ": a world of one process has no peer to receive from"); }
  std::vector<uint64_t> exchange(const std::vector<uint64_t>& values, const Call&) override { return values; }
  std::vector<uint64_t> swap(const std::vector<uint64_t>&, int, const Call& c) override {
    throw Error(c.label + ": a world of one process has no peer");
  }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(int world_rank) { return std::make_unique<LocalCommunicator>(world_rank); }

}  // namespace esg::dist
