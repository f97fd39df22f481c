# esg_core: what the C ABI, the tests and the fuzzers link. Every layer of the core, and the
# library's start-up that wires them (the table of backends, the world probe: startup.cpp), whose
# object each binary linking esg_core directly gets once, so a test or a fuzzer runs wired as the
# library does. Included by the top-level CMakeLists.txt right after the core, before the
# fuzzers, which build nothing else.
add_library(esg_core OBJECT ${CMAKE_CURRENT_LIST_DIR}/startup.cpp)
target_link_libraries(esg_core PUBLIC esg_backends esg_cpu esg_ascend esg_quantize)
