// A C++ client as written for the oldest recorded release: compiled against that release's
// headers (tests/compat/api-<N>/include), run against the current library.
#include <cstdio>
#include <string>

#include <esgraph/esgraph.hpp>

int main() {
  int passed = 0, failed = 0;
  auto check = [&](bool ok, const char* what) {
    if (ok) ++passed;
    else { ++failed; std::fprintf(stderr, "failed: %s\n", what); }
  };
  esg::GraphBuilder b("old_cpp_client");
  const esg::Tensor x = b.input("x", esg::f32, {b.symbol("batch"), 8, 32});
  const esg::Tensor w = b.input("w", esg::f32, {32, 32});
  const esg::Tensor y = esg::layer_norm(x + esg::softmax(esg::matmul(x, w) * 0.5, esg::SoftmaxOptions().axis(-1)));
  check(y.shape()[2] == 32 && y.dim_name(0) == "batch", "shape of y");
  const auto outs = esg::if_(b.input("c", esg::boolean, {}), [&] { return esg::exp(y); }, [&] { return y; });
  check(outs.size() == 1, "if_ outputs");
  try {
    (void)(x + b.input("bad", esg::f32, {7}));
    check(false, "a broadcast error was not raised");
  } catch (const esg::ShapeError& e) {
    check(std::string(e.what()).find("broadcast") != std::string::npos, "ShapeError message");
  }
  b.clear_error();
  const esg::Graph g = b.build(outs);
  check(g.node_count() >= 6, "node count");
  check(esg::Graph::deserialize(g.serialize()).to_text() == g.to_text(), "round trip");
  std::printf("old C++ client (headers %s, library %s): %d passed, %d failed\n", ESG_VERSION_STRING, esg_version(),
              passed, failed);
  return failed ? 1 : 0;
}
