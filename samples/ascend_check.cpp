// esgraph's Ascend smoke set from C++ (what `python3 -m esgraph ascend-check` prints): each case
// on the device against the CPU. `ascend_check_cpp` runs on the device, `ascend_check_cpp
// ascend-sim` on the simulated one; the exit status is 0 when every case passed, 1 when one did
// not, 2 when the device cannot start (the message names what is missing), 3 when what ran passed
// and the rest was refused by name (what this CANN or device cannot run).
#include <cstdio>

#include <esgraph/ascend_check.hpp>

int main(int argc, char** argv) {
  const char* backend = argc > 1 ? argv[1] : "ascend";
  try {
    const esg::AscendCheck check = esg::ascend_check(backend);
    std::fputs(check.table().c_str(), stdout);
    return check.passed() ? 0 : check.partial() ? 3 : 1;
  } catch (const esg::BackendError& e) {
    std::fprintf(stderr, "ascend_check: the %s backend cannot start: %s\n", backend, e.what());
    return 2;
  }
}
