# The two commands of the README. Both install what is missing, configure and build.
#   make demo   build, then run the flagship C++ sample (a transformer encoder block)
#   make test   build, run every suite (C++, C99, codegen, Python), the C/C++ suites again
#               under AddressSanitizer + UBSan, the concurrency tests under ThreadSanitizer
#               (clang), and the fuzzers over their committed corpus (clang)
#   make bench  graph building against onnx.helper and torch.fx, compile time, per-launch overhead, an elementwise chain,
#               models written in esgraph and imported from torch.nn, against PyTorch and ONNX Runtime,
#               torch.compile(backend="esgraph") against eager PyTorch and TorchInductor
#               (requirements.txt's onnxruntime, given esgraph's thread count)
#   make conformance  ONNX's node test suite through the importer; rewrites docs/conformance.md
#   make conformance-latest  the same for the newest onnx release's suite (an environment of its own);
#               rewrites docs/conformance-latest.md
#   make release-snapshot   record the current API version (see scripts/release-snapshot.sh)
#   make package  a .deb of the library, headers, CMake package, esgraph.pc and Python package
#   make fuzz     each libFuzzer target for FUZZ_SECONDS (default 60) from the committed corpus;
#                 new inputs go to build/fuzz/corpus/, crashes to build/fuzz/findings/; then the
#                 ONNX importer's hypothesis properties for FUZZ_SECONDS each
#   make test-tsan  the concurrency tests under ThreadSanitizer (clang); part of make test
# The project's Python environment (scripts/install-venv.sh): every script and test runs with it.
PY      := $(CURDIR)/.venv/bin/python
JOBS    ?= 2
FUZZ_SECONDS ?= 60
FUZZERS := graph_file_fuzzer builder_fuzzer model_file_fuzzer integer_graph_fuzzer
.PHONY: deps build demo test test-asan test-tsan test-fuzz fuzz pytest conformance conformance-latest bench package release-snapshot clean

deps:
	@scripts/install-deps.sh
	@scripts/install-venv.sh

build: deps
	@cmake --preset default >/dev/null
	@cmake --build --preset default -j$(JOBS)

demo: build
	./build/default/samples/transformer_block_cpp build/default/encoder_block.esg

test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j$(JOBS)
	ctest --preset asan

test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j$(JOBS)
	ctest --preset tsan

# The fuzzers' committed corpus, every input once (crashes found before stay fixed).
test-fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j$(JOBS)
	ctest --preset fuzz

fuzz: test-fuzz build
	@for t in $(FUZZERS); do \
	  mkdir -p build/fuzz/corpus/$$t build/fuzz/findings && \
	  ./build/fuzz/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
	    -artifact_prefix=build/fuzz/findings/$$t- build/fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done
	cd build/default && ESG_FUZZ_SECONDS=$(FUZZ_SECONDS) PYTHONPATH=$(CURDIR)/build/default/python \
	  $(PY) -m pytest -q -s -p no:cacheprovider $(CURDIR)/tests/python/test_onnx_fuzz.py

# The TensorFlow frontend's tests run in a process of their own: TensorFlow's protobuf runtime and
# the one Debian's onnx extension links do not share a process (onnx.checker crashes after TF loads).
pytest: build
	cd build/default && PYTHONPATH=$(CURDIR)/build/default/python $(PY) -m pytest -q $(CURDIR)/tests/python $(CURDIR)/tests/codegen \
	  $(CURDIR)/tests/tools $(CURDIR)/tests/conformance $(CURDIR)/tests/distributed --ignore=$(CURDIR)/tests/python/tensorflow_frontend
	cd build/default && PYTHONPATH=$(CURDIR)/build/default/python $(PY) -m pytest -q $(CURDIR)/tests/python/tensorflow_frontend

conformance: build
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) tests/conformance/report.py --write

# The newest onnx release's node suite, in an environment of its own (its pins:
# tests/conformance/requirements-latest.txt), through the module built for the project's Python.
LATEST_PY := $(CURDIR)/build/onnx-latest/venv/bin/python
conformance-latest: build
	@[ -x $(LATEST_PY) ] || /usr/bin/python3 -m venv --system-site-packages build/onnx-latest/venv
	@$(LATEST_PY) -m pip install --disable-pip-version-check --no-input -q -r tests/conformance/requirements-latest.txt
	PYTHONPATH=$(CURDIR)/build/default/python $(LATEST_PY) -W ignore tests/conformance/report.py --write

test: build
	ctest --preset default
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-tsan
	$(MAKE) --no-print-directory test-fuzz
	$(MAKE) --no-print-directory pytest

# mpirun refuses root unless told (CI runs as root).
MPI_AS_ROOT := $(shell [ "$$(id -u)" -eq 0 ] && echo --allow-run-as-root)

bench: build
	@scripts/install-deps.sh libopenblas-dev libblis-dev libdnnl-dev libxnnpack-dev libpthreadpool-dev
	@cmake --preset default >/dev/null
	@cmake --build --preset default -j$(JOBS)
	./build/default/bench/bench_build --benchmark_min_time=0.5
	./build/default/bench/bench_launch --benchmark_min_time=0.3
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 BLIS_NUM_THREADS=1 ./build/default/bench/bench_gemm --benchmark_min_time=0.2
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/build_throughput.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/elementwise_chain.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/norms.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/models.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/imported_models.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/torch_compile.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/model_load.py
	PYTHONPATH=$(CURDIR)/build/default/python $(PY) bench/ascend_lowering.py
	mpirun -np 2 --oversubscribe $(MPI_AS_ROOT) ./build/default/bench/bench_allreduce

package: build
	cd build/default && cpack -G DEB

# Records the API version of VERSION: op-set history, ABI baseline, frozen headers, graph files.
release-snapshot: build
	scripts/release-snapshot.sh

clean:
	rm -rf build
