// A plan as bytes, for the compiled-model file (model_file.hpp): its optimized graph (a record
// stream over the file's table of constants), its fused groups and everything the pipeline
// decided (launch list, streams and events, the memory plan's offsets and figures, what a
// binding of a symbolic plan checks), so that reading it back runs no pass and plans nothing.
//
// A plan read from a file is checked as a hostile one: every id, index and count against what it
// names; each launch's operands against its op or group in the graph; every arena operand
// aligned and within the arena at the plan's largest sizes; each wait on an earlier launch of
// another stream (no cycle can hang a run); each group against the backend's grouping rules;
// and every value's type against the one the file recorded. A failure is ir::Error Format.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/serialize.hpp"
#include "runtime/plan.hpp"

namespace esg::runtime {

class PlanRecord {
 public:
  // `plan`'s bytes, its constants added to `blobs`.
  static std::vector<uint8_t> write(const Plan& plan, ir::BlobTable& blobs);
  // The plan of `bytes`, its constants `blobs`, checked against `options`' backend.
  static std::unique_ptr<Plan> read(const uint8_t* bytes, size_t size, const std::vector<ir::ConstBlob>& blobs, const CompileOptions& options);

 private:
  class Reader;  // a record's bytes, read against the loaded graph's ids
  // read()'s steps, in the record's order, then the launch list checked as a whole.
  static void read_types(Reader& in, const ir::Graph& g, Plan::Decided& d);  // and a symbolic plan's largest sizes
  static std::shared_ptr<const std::vector<FusedGroup>> read_groups(Reader& in, const ir::Graph& g, const CompileOptions& options);
  static void read_launches(Reader& in, const ir::Graph& g, size_t groups, Plan::Decided& d);  // with waits, streams, log
  static void read_figures(Reader& in, const ir::Graph& g, Plan::Decided& d);  // output copies, views, the memory figures
  static void check_launches(Reader& in, const ir::Graph& g, const std::vector<FusedGroup>& groups, const Plan::Decided& d);
};

}  // namespace esg::runtime
