# ergon: the two entry points of README.md (make demo, make test) and helpers.
# Both install missing Debian packages, configure and build.

# iproute2: `ip netns`/veth for the multi-host fault test (tests/cli/multihost_faults.sh);
# poppler-utils: pdftotext reads the text of the pictures (tests/cli/show_frontier_profiled.sh);
# clang-format: `make format`, and lint/format_check checks every C file follows .clang-format.
# prometheus: cli/prometheus_fleet scrapes `ergon serve` and checks the Grafana dashboard's queries.
DEB_PACKAGES := build-essential cmake pkg-config clang clang-format libclang-rt-14-dev \
  libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libsqlite3-dev sqlite3 \
  libcairo2-dev libcminpack-dev libglpk-dev libopenblas-dev python3 poppler-utils iproute2 \
  prometheus
# PyTorch (CPU, gloo) for the end-to-end example (examples/pytorch_pipeline): `make test`,
# `make e2e` and `make test-e2e` install it (the e2e tests skip, saying so, without it);
# pydantic (v1 API, Debian 12: 1.10) lets cli/zeus_pydantic check our Zeus dumps and settings
# parsing against the library the Zeus server itself uses.
E2E_PACKAGES := python3-torch python3-torchvision python3-pydantic
# `make e2e` runs the example trainer on the venv's torch 2 (PyTorch's own pipeline runtime).
E2E_PYTHON = $(PY_VENV)/bin/python
# The real training stacks (PyTorch 2, Zeus, DeepSpeed, Megatron-core, JAX) from PyPI, pinned in
# requirements.txt, in a virtual environment under the build tree: `make py-deps`. Rerunning it
# is a no-op (a stamp records the requirements it installed); pip's cache keeps a second fresh
# build fast. Tests that need these packages run with $(PY_VENV)/bin/python (docs/py-deps.md).
PY_VENV ?= $(abspath $(BUILD))/venv
PY_BASE := /usr/bin/python3
E2E_OUT ?= e2e-out
E2E_ARGS ?=
# Debian's packaging tools for `make deb` and the package test (tests/cli/install_packages.sh;
# adduser: the ergond package depends on it).
DEB_TOOLS := debhelper dh-python lintian adduser
DEB_OUT ?= build-deb
PREFIX ?= /usr/local
DESTDIR ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BUILD ?= build
ASAN_BUILD ?= build-asan

PY_STAMP := $(PY_VENV)/.ergon-requirements

.PHONY: py-deps all deps e2e-deps deb-deps build build-asan demo test test-release test-asan test-e2e fuzz fuzz-build fuzz-check bench e2e format clean \
  install uninstall deb

all: build

# $(call install_missing,PACKAGES): apt-get install the ones not installed yet.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install_missing,$(DEB_PACKAGES))

e2e-deps: deps
	$(call install_missing,$(E2E_PACKAGES))

deb-deps: deps
	$(call install_missing,$(DEB_TOOLS))

py-deps: $(PY_STAMP)

$(PY_STAMP): requirements.txt
	$(call install_missing,python3-venv)
	@[ -x $(PY_VENV)/bin/python ] || $(PY_BASE) -m venv $(PY_VENV)
	@start=$$(date +%s); \
	$(PY_VENV)/bin/python -m pip install --disable-pip-version-check -q -r requirements.txt || { \
	  echo "make py-deps: pip could not install requirements.txt into $(PY_VENV) (is PyPI reachable?)"; exit 1; }; \
	echo "make py-deps: $(PY_VENV) ready in $$(( $$(date +%s) - start )) s"
	@cp requirements.txt $(PY_STAMP)

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DERGON_PY_VENV=$(PY_VENV) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DERGON_SANITIZE=ON -DERGON_PY_VENV=$(PY_VENV) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

demo: build
	@bash tools/demo.sh $(BUILD)/ergon

test: fuzz-check test-release test-asan

test-release: build e2e-deps deb-deps py-deps
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ERGON_SANITIZED=1 ctest --output-on-failure -j $(JOBS)

# The whole story with a real PyTorch job (docs/e2e.md): profile, plan, choose, train
# at all-max and with the plan, compare. No GPU needed (simulated GPU). The example trainer
# runs paced through the tests' harness (tests/e2e/harness/run_e2e.py, trainer.py).
# E2E_GPU picks the GPU back-end (default auto: NVML, else amdsmi, else the simulated GPU),
# e.g. E2E_GPU=amdsmi:$(BUILD)/tests/fake_amdsmi/libamd_smi.so or nvml:LIB (docs/e2e.md).
E2E_GPU ?= auto
e2e: build py-deps
	$(E2E_PYTHON) tests/e2e/harness/run_e2e.py --ergon $(BUILD)/ergon --out $(E2E_OUT) --gpu $(E2E_GPU) $(E2E_ARGS)

# Only the end-to-end tests (tests/e2e/e2e_*.sh), with PyTorch installed.
test-e2e: build e2e-deps py-deps
	cd $(BUILD) && ctest --output-on-failure -R 'e2e/e2e_'

# Every parser has a libFuzzer target (tests/fuzz/, docs/fuzzing.md).
# make fuzz: open-ended random exploration, FUZZ_SECONDS per target; what it finds becomes a
#   corpus file in tests/fuzz/corpus/NAME/ plus a fix. It may find something new on any run.
# make fuzz-check (the fuzz stage of make test): replays the committed corpus, then a
#   fixed-seed exploration of FUZZ_RUNS inputs per target: the same answer on the same code.
FUZZ_SECONDS ?= 15
FUZZ_RUNS ?= 20000
FUZZ_SEED ?= 1
fuzz-build: deps
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DERGON_FUZZ=ON -DBUILD_TESTING=ON >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_all

fuzz: fuzz-build
	bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

fuzz-check: fuzz-build
	bash tests/fuzz/run.sh --fixed build-fuzz $(FUZZ_RUNS) $(FUZZ_SEED)

# Install into PREFIX (default /usr/local; DESTDIR honoured): library, headers, ergon.pc,
# CMake package, ergon, ergond, man pages, bash completion, the Python package, the systemd
# unit and a default ergond.conf (see packaging/install.cmake). `make uninstall` undoes it.
install: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

uninstall:
	@[ -f $(BUILD)/install_manifest.txt ] || { echo "nothing installed from $(BUILD)"; exit 1; }
	xargs -d '\n' rm -fv -- < $(BUILD)/install_manifest.txt

# Debian packages (libergon0, libergon-dev, ergon, ergond, python3-ergon) with
# dpkg-buildpackage/debhelper in a copy of the tree, checked by lintian; .debs in $(DEB_OUT)/.
deb: deb-deps
	JOBS=$(JOBS) bash packaging/build-deb.sh $(DEB_OUT)

bench: build
	bash bench/run.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz $(E2E_OUT) $(DEB_OUT)
