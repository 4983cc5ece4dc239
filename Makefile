# MRC testbed. `make setup` then `make test`; `make help` lists every target.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
APT_PACKAGES := mininet iproute2 ethtool tcpdump tshark iperf3 tcpreplay nftables \
	python3-venv python3-pip python3-dev gcc python3-thrift util-linux procps iputils-ping chromium
# Root is needed for namespaces, veths and BMv2 interfaces; the toolchain overrides travel along.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo --preserve-env=P4C,P4C_BAREFOOT,SIMPLE_SWITCH_GRPC,SIMPLE_SWITCH_CLI,MRC_PI_SERVER,PATH)
P4C ?= $(shell command -v p4c 2>/dev/null)
# The p4c driver runs its BMv2 backend from its own directory; a p4c built without it cannot build mrc.p4.
P4C_BMV2 = $(if $(P4C),$(wildcard $(dir $(realpath $(P4C)))p4c-bm2-ss))
P4C_BAREFOOT ?= $(shell command -v p4c-barefoot 2>/dev/null)
P4SRC := p4src
P4_PROGRAMS := mrc l3_baseline
# pytest exits 5 when every test was deselected or skipped away: that is not a failure here.
PYTEST_OK5 := rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests ran (exit 5), not a failure"; rc=0; fi; exit $$rc
# `make test` collects every suite's skips here (tests/skip_log.py) and ends with their summary;
# SKIP_LOG=FILE on `make unit`, `make ptf` or `make e2e` records theirs too.
TEST_SKIP_LOG := build/test-skips.jsonl
SKIP_ARGS = $(if $(SKIP_LOG),--skip-log $(abspath $(SKIP_LOG)))

.PHONY: help setup live-js native toolchain test unit ptf e2e browser lint build doctor fuzz bench-dataplane bench-agent bench-api bench-controller bench-targets shell clean

help:  ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

setup:  ## Install apt packages and the virtualenv (.venv, sees Debian's Mininet); idempotent
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "apt: installing $$missing"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	else echo "apt: all packages present"; fi
	@test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@$(PY) -c "import mininet, scapy, finsy, ptf; print('setup: virtualenv ready,', 'mininet', mininet.__file__)"
	$(PY) -m tools.build_native
	$(MAKE) --no-print-directory live-js

# The live page's JavaScript libraries, from npm at the versions of testbed/live/package-lock.json.
LIVE_JS := build/live-js
live-js:  ## Install the live page's JavaScript (npm, into build/live-js; `make setup` runs it)
	@command -v npm >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
	@mkdir -p $(LIVE_JS) && cp testbed/live/package.json testbed/live/package-lock.json $(LIVE_JS)/
	cd $(LIVE_JS) && npm ci --no-audit --no-fund --loglevel=error

native:  ## Compile the agent's core and per-packet I/O with mypyc into build/native (after editing agent/)
	$(PY) -m tools.build_native $(NATIVE_ARGS)

# Stdlib only, so it runs before `make setup` too; PLAN=1 prints what it would do and stops.
toolchain:  ## Build PI, BMv2 and p4c at the commits of tools/toolchain/pins.toml into PREFIX (/usr/local) [P4_SRC=DIR] [TOFINO=1] [ONLY=pi,bmv2] [PLAN=1]
	$(SUDO) /usr/bin/python3 -m tools.toolchain --prefix $(or $(PREFIX),/usr/local) $(if $(P4_SRC),--src $(P4_SRC)) $(if $(filter 1 yes,$(TOFINO)),--tofino) $(if $(ONLY),--only $(ONLY)) $(if $(PLAN),--plan) $(TOOLCHAIN_ARGS)

test:  ## Every test: unit, p4c artifact check, PTF, BMv2/Mininet end-to-end (where present); then each skip reason with its count
	@mkdir -p $(dir $(TEST_SKIP_LOG)) && rm -f $(TEST_SKIP_LOG)
	@rc=0; $(MAKE) --no-print-directory unit browser ptf e2e SKIP_LOG=$(TEST_SKIP_LOG) || rc=$$?; \
		$(PY) -m tests.skip_log $(TEST_SKIP_LOG); exit $$rc

unit:  ## pytest unit tests (tests needing p4c, BMv2 or root skip with a reason); agent's again in pure Python
	$(SUDO) $(PY) -m pytest -q tests/unit $(SKIP_ARGS); $(PYTEST_OK5)
	$(SUDO) env MRC_AGENT_PURE_PYTHON=1 $(PY) -m pytest -q tests/unit/agent tests/unit/wire $(SKIP_ARGS); $(PYTEST_OK5)

ptf:  ## PTF data-plane suite against simple_switch_grpc over veths (skips without BMv2/root)
	$(SUDO) $(PY) -m tests.ptf.runner $(SKIP_ARGS) $(PTF_ARGS)

e2e:  ## End-to-end: controller on BMv2, Mininet fabrics, agents in namespaces (skip without tools/root)
	$(SUDO) $(PY) -m pytest -q tests/bmv2 tests/e2e $(SKIP_ARGS); $(PYTEST_OK5)

browser:  ## The live page in headless Chromium via Playwright (skips without chromium/playwright)
	$(SUDO) $(PY) -m pytest -q tests/browser $(SKIP_ARGS); $(PYTEST_OK5)

.PHONY: live-screenshot
live-screenshot:  ## Take README's figure of the live view again (docs/figures/live-view.png; root, Mininet, chromium)
	$(SUDO) $(PY) -m tools.live_screenshot

lint:  ## ruff, mypy and the import-linter architecture contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# P4Info is written as .txt (the suffix every p4c release knows) and renamed to .txtpb.
# Each program is built where its compiler is present: BMv2 with p4c, Tofino (TNA) with p4c-barefoot.
build:  ## Compile p4src/*.p4 into p4src/build/ (BMv2 JSON + P4Info) and, with p4c-barefoot, p4src/tna/ into p4src/build/tna/
	@if [ -z "$(P4C)" ] && [ -z "$(P4C_BAREFOOT)" ]; then echo "p4c not found: install it (see README) or set P4C=/path/to/p4c"; exit 1; fi
	@if [ -z "$(P4C)" ]; then echo "p4c not found: BMv2 programs not built"; \
	elif [ -z "$(P4C_BMV2)" ]; then echo "$(P4C) has no BMv2 backend (p4c-bm2-ss): BMv2 programs not built"; else \
	for prog in $(P4_PROGRAMS); do \
		echo "p4c: $(P4SRC)/$$prog.p4"; \
		$(P4C) --target bmv2 --arch v1model --std p4-16 -o $(P4SRC)/build \
			--p4runtime-files $(P4SRC)/build/$$prog.p4info.txt $(P4SRC)/$$prog.p4 || exit 1; \
		mv $(P4SRC)/build/$$prog.p4info.txt $(P4SRC)/build/$$prog.p4info.txtpb; \
		rm -f $(P4SRC)/build/$$prog.p4i; \
	done; \
	$(P4C) --version | head -1 > $(P4SRC)/build/p4c-version.txt; fi
	@if [ -z "$(P4C_BAREFOOT)" ]; then echo "p4c-barefoot not found: TNA program not built (see \`make doctor\`)"; \
	else P4C_BAREFOOT=$(P4C_BAREFOOT) $(PY) -m tools.build_tna; fi

doctor:  ## Which optional tools are present, and what each missing one disables
	$(PY) -m tools.doctor

fuzz:  ## Hostile peers vs a running agent during real transfers, FUZZ_S seconds (default 60): alive, RSS, files (JSON)
	$(SUDO) $(PY) -m tools.fuzz --duration $(or $(FUZZ_S),60) $(FUZZ_ARGS)

bench-dataplane:  ## BMv2 packets/s, mrc.p4 / L3 baseline: equal fan-out, no trimming; and mrc.p4 at full work (JSON)
	$(SUDO) $(PY) -m tools.bench_dataplane $(BENCH_ARGS)

bench-agent:  ## Agent core pps, and mrc-perf vs iperf3 over a veth pair, lossless and 1% loss (JSON)
	$(SUDO) $(PY) -m tools.bench_agent $(BENCH_ARGS)

bench-api:  ## WRITE messages/s and goodput through the host API vs mrc-perf over a veth pair, 4K-256K messages (JSON)
	$(SUDO) $(PY) -m tools.bench_api $(BENCH_ARGS)

bench-controller:  ## Controller: batched vs single writes (bmv2); failover over 50 link cuts on TARGET=bmv2|linux (JSON)
	$(SUDO) $(PY) -m tools.bench_controller --target $(or $(filter-out auto,$(TARGET)),bmv2) $(BENCH_ARGS)

bench-targets:  ## spray (leaf-spine-4x4) on every available target, interleaved seed by seed, MRC vs single over 5 seeds (JSON)
	$(SUDO) $(PY) -m tools.bench_targets $(BENCH_ARGS)

shell:  ## p4runtime-shell on one switch (SW=s1), from its own virtualenv, no pipeline push
	@test -x .venv-shell/bin/python || (/usr/bin/python3 -m venv .venv-shell && .venv-shell/bin/pip install -q p4runtime-shell)
	$(PY) -m tools.p4rt_shell $(SW) $(TOPO)

clean:  ## Remove caches and build/ (the native agent too: `make native`); keeps the virtualenv
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis build

# -- the testbed runner and experiments (testbed/, experiments/) ---------------------------------
.PHONY: run-topology stop experiment cluster-scheduler cluster-worker

run-topology:  ## TOPO on TARGET [ROUTING=static|reactive|converge:S] [PATH_MODE=ecmp|structured|srv6] [BACKUP=1] with controller and agents; Mininet CLI + fail/restore/restart/mrc/status; live view on LIVE_PORT (8765)
	$(SUDO) $(PY) -m testbed run $(or $(TOPO),leaf-spine) --target $(or $(TARGET),auto) $(if $(ROUTING),--routing $(ROUTING)) $(if $(PATH_MODE),--path-mode $(PATH_MODE)) $(if $(BACKUP),--backup) --live-port $(or $(LIVE_PORT),8765) $(if $(LIVE_HOST),--live-host $(LIVE_HOST))

stop:  ## Stop every testbed run and remove what any run left (namespaces, veths, processes)
	$(SUDO) $(PY) -m testbed stop

experiment:  ## NAME=failover|reboot|loss|spray|incast|collective|controller [TOPO=] [TARGET=auto|bmv2|linux] [ROUTING=static,...] [ROCE=perftest,nccl,adaptive] [PATH_MODE=] [BACKUP=1] [SEEDS=5] [SET="duration_s=10 ..."] [LIVE=1] [CLUSTER=tcp://HOST:PORT]: results/<name>-<time>/
	@test -n "$(NAME)" || { echo "usage: make experiment NAME=<experiment> [TOPO=...] [TARGET=...] [SEEDS=5]"; exit 2; }
	$(SUDO) env LIVE=$(LIVE) LIVE_PORT=$(LIVE_PORT) $(PY) -m experiments $(NAME) $(if $(TOPO),--topo $(TOPO)) --target $(or $(TARGET),auto) $(if $(ROUTING),--routing $(ROUTING)) $(if $(ROCE),--roce $(ROCE)) $(if $(PATH_MODE),--path-mode $(PATH_MODE)) $(if $(BACKUP),--backup) --seeds $(or $(SEEDS),5) $(foreach s,$(SET),--set $(s)) $(if $(CLUSTER),--cluster $(CLUSTER))

# Sweeps on many machines (docs/experiments.md): one scheduler anywhere, a worker per machine.
cluster-scheduler:  ## Start the Dask scheduler of experiment sweeps on many machines; prints its address and dashboard [PORT=8786]
	$(PY) -m experiments.cluster scheduler $(if $(PORT),--port $(PORT))

cluster-worker:  ## SCHEDULER=tcp://HOST:PORT: on a machine after `make setup`, a worker taking one experiment seed at a time (root) [WORKER_PORT=any free]
	@test -n "$(SCHEDULER)" || { echo "usage: make cluster-worker SCHEDULER=tcp://HOST:PORT [WORKER_PORT=N]"; exit 2; }
	$(SUDO) $(PY) -m experiments.cluster worker $(SCHEDULER) $(if $(WORKER_PORT),--port $(WORKER_PORT))
