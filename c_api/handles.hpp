// What the C ABI's opaque handles are, and the error plumbing every entry point shares.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "esgraph/c/esgraph.h"
#include "eval/host_tensor.hpp"
#include "ir/builder.hpp"
#include "ir/error.hpp"

namespace esg::capi {
uint32_t next_epoch();  // a new epoch, never one handed out before (live_builders.cpp)
}  // namespace esg::capi

struct esg_builder {
  explicit esg_builder(std::string name) : core(std::move(name)), epoch(esg::capi::next_epoch()) {}
  esg::ir::Builder core;
  // Tensors of another epoch are stale. A new one at creation and at each build, from one
  // counter for all builders, so a tensor of a destroyed builder never matches a builder made
  // later at the same address. Never 0.
  uint32_t epoch;
  esg_status first_status = ESG_OK;
  std::string first_error;
  bool sticky_errors = true;  // a failed call sets the first error (esg_builder_set_sticky_errors)
};

struct esg_graph {
  explicit esg_graph(std::unique_ptr<esg::ir::Graph> graph) : g(std::move(graph)) {}
  std::unique_ptr<esg::ir::Graph> g;
  // Every value's printed name, made on the first esg_graph_value_name so that the strings
  // live as long as the graph (a graph is immutable once built; call_once keeps readers on
  // several threads safe).
  std::once_flag names_once;
  std::vector<std::string> value_names;
};

namespace esg::capi {

// Records a failure: the thread's last error, and the builder's first error if it has none.
void set_error(esg_builder* b, esg_status status, const std::string& message);
void clear_error();
// A caller's buffer as a tensor ref, checking what can be checked without a model: buffer
// `index` of a call's `what` ("esg_model_run: input").
eval::TensorRef ref_of(const esg_buffer& b, const char* what, size_t index);
// Runs `f`, turning exceptions into the thread's last error (and the builder's first).
// Returns whether `f` succeeded.
template <class F>
bool guarded(esg_builder* b, F&& f) {
  try {
    clear_error();
    f();
    return true;
  } catch (const ir::Error& e) {
    set_error(b, static_cast<esg_status>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    set_error(b, ESG_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    set_error(b, ESG_ERR_INTERNAL, std::string("internal error: ") + e.what());
  }
  return false;
}

// Builders alive and their epochs, so that a tensor naming a destroyed one is refused before its
// address is followed (live_builders.cpp). Registered by esg_builder_create and
// esg_builder_destroy; a build gives its builder a new epoch through new_epoch.
void register_builder(const esg_builder* b);
void unregister_builder(const esg_builder* b);
void new_epoch(esg_builder* b);
uint32_t live_epoch(const esg_builder* b);  // 0: no builder lives at that address
bool builder_alive(const esg_builder* b);

// Whether a tensor handle is usable: set, of `expected` (if given; a builder the caller has
// already found alive), of a live builder, not stale. Its builder is read only once the handle's
// epoch is that builder's.
inline bool tensor_ok(esg_tensor t, const esg_builder* expected) {
  return t.priv_builder &&
         (expected ? t.priv_builder == expected && t.priv_epoch == expected->epoch : live_epoch(t.priv_builder) == t.priv_epoch) &&
         t.priv_value < t.priv_builder->core.graph().values.size();
}
// The value of a tensor handle, or an exception saying why it is not usable; `what` names
// the argument in the error.
ir::ValueId resolve(esg_tensor t, const esg_builder* expected, const std::string& what);
esg_tensor make_tensor(esg_builder* b, ir::ValueId v);
// Copies a string into thread-local storage that lives until the thread's next such call.
const char* scratch(std::string s);

}  // namespace esg::capi
