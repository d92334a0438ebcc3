# The commands our users type. Every target creates/updates the project virtualenv
# (.venv, from pyproject.toml) on first use; all output goes to sim_build/.
#
#   make sim   [BLOCK=<block>] [SEED=<n>] [JOBS=<n>] [SHARD=<i>/<N>]   cocotb regression on Verilator (the main job;
#                                           JOBS defaults to the machine's cores)
#   make sim-merge [SHARDS=<N>]             merge the shards' JUnit files into sim_build/reports/sim.xml
#   make test                               lint + golden-model/script unit tests + contracts + regression
#   make lint                               ruff (configuration in pyproject.toml)
#   make verilog                            sim_build/verilog/<design>.v for every design
#   make waves TEST=<test>                  rerun one test with tracing, open GTKWave
#   make synth [BLOCK=<design or block>]    Yosys area report (GE, µm² at 45 nm, gate levels)
#   make timing [BLOCK=<design or block>]   OpenSTA on the OSU 0.18 µm cells: critical paths in ns and FO4,
#                                           sim_build/reports/timing.{json,md} and docs/area.md
#   make bench [BLOCK=<block>]              every benchmark, one table, sim_build/reports/bench.json
#   make formal [BLOCK=<block>] [PROPERTY=<name>]   formal properties (BMC / k-induction), sim_build/reports/formal.json
#   make formal-fast                        the formal subset make test runs (properties marked fast, their mutants)
#   make mutate [BLOCK=<block>]             Yosys mutate-pass mutants of the security-relevant modules against the
#                                           formal properties and targeted simulations, sim_build/reports/mutate.json
#   make coverage [BLOCK=<block>] [JOBS=<n>]   regression with Verilator line/toggle and functional coverage,
#                                           sim_build/reports/{coverage,functional}.{json,md}, coverage-html/
#   make soak [CAMPAIGN=<name>] [COUNT=<n>|HOURS=<h>] [SHARD=<i>/<N>] [SEED=<base>]   soak campaigns
#                                           (sxp_system, gcm, bcu), sim_build/reports/soak.json; RERUN=<seed>

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
READY  := $(VENV)/.installed
# NVIDIA's verifier (sw/spdm/test_nvidia.py) pins another cryptography: a venv of its own
NVENV  := sim_build/nvenv
NVREADY := $(NVENV)/.installed
REPORTS := sim_build/reports
CONTRACTS := ../shared/tools/check_contracts.py

# JOBS=n runs the regression in n pytest-xdist workers (a test file per worker at a time, so
# one file's Verilator builds are never raced; builds and conversions are locked anyway); the
# default is every core of the machine, JOBS=1 a serial run
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
comma := ,
XDIST = $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadfile)

# SHARD=i/N runs shard i (1-based) of N of the selected tests, balanced by expected cost
# (tb/common/shard.py), and writes its JUnit XML to sim-<i>of<N>.xml; `make sim-merge`
# merges the shards' files (a CI matrix: one machine per shard, then one merge job)
SHARDING = $(if $(SHARD),-p tb.common.shard --shard $(SHARD))
SIM_XML = $(REPORTS)/$(if $(SHARD),sim-$(subst /,of,$(strip $(SHARD))),sim).xml

ifneq ($(SEED),)
export SEED
endif
export PYTHONPATH := $(CURDIR)

# BLOCK may name a block folder (aes, gcm, …) or a design (aes256, gcm_core, …); a block
# that is software only (ccu) runs its tests in sw/<block>; a name with no tests fails
# (scripts/blocks.py)

.PHONY: all sim sim-merge test lint unit verilog contracts waves synth timing bench formal formal-fast mutate coverage soak \
	clean distclean venv nvenv
all: test

venv: $(READY)
$(READY): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) (3.11+)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

nvenv: $(NVREADY)
$(NVREADY): sw/spdm/nvidia-requirements.txt
	$(PYTHON) -m venv $(NVENV)
	$(NVENV)/bin/pip install -q -r sw/spdm/nvidia-requirements.txt
	@touch $@

sim: $(READY)
	@mkdir -p $(REPORTS)
	@paths=$$($(PY) -m scripts.blocks $(BLOCK)) || exit 2; \
	echo "$(PY) -m pytest $$paths $(XDIST) $(SHARDING) -v -s"; \
	$(PY) -m pytest $$paths $(XDIST) $(SHARDING) -v -s -p no:cacheprovider --junitxml=$(SIM_XML)

sim-merge: $(READY)
	$(PY) scripts/merge_junit.py $(if $(SHARDS),--shards $(SHARDS)) --out $(REPORTS)/sim.xml $(REPORTS)

lint: $(READY)
	$(VENV)/bin/ruff check hw sw tb scripts formal

unit: $(READY) $(NVREADY)
	@mkdir -p $(REPORTS)
	$(PY) -m pytest sw scripts -v -p no:cacheprovider --junitxml=$(REPORTS)/unit.xml

verilog: $(READY)
	$(PY) scripts/verilog.py

contracts: verilog
	@if [ -f $(CONTRACTS) ]; then $(PY) $(CONTRACTS) sim_build/verilog; \
	else echo "notice: $(CONTRACTS) not found beside this clone: block contracts not checked"; fi

test: lint unit contracts formal-fast sim

waves: $(READY)
	@test -n "$(TEST)" || { echo "usage: make waves TEST=<cocotb or pytest test name>"; exit 2; }
	$(PY) scripts/waves.py $(TEST)

synth: $(READY)
	$(PY) scripts/synth.py $(BLOCK)

timing: $(READY)
	$(PY) scripts/timing.py $(BLOCK)

bench: $(READY)
	$(PY) scripts/bench.py $(BLOCK)

formal: $(READY)
	$(PY) scripts/formal.py $(BLOCK) $(if $(PROPERTY),--property $(PROPERTY))

formal-fast: $(READY)
	$(PY) scripts/formal.py --fast

mutate: $(READY)
	$(PY) scripts/mutate.py $(BLOCK)

# coverage builds are Verilator builds of their own (sim_build/verilator/<design>-cov/), so
# `make sim` never pays for coverage; fails on a failed test or a functional bin never hit
coverage: $(READY)
	$(PY) -m scripts.coverage run $(BLOCK) --jobs $(JOBS)

# soak campaigns (scripts/soak.py; not part of sim/test, whose smoke test is tb/common/test_soak.py):
# COUNT attempts per campaign (default: its target) or HOURS of fresh seeds each, SHARD=i/N takes
# every N-th seed, SEED the base seed (default fresh); RERUN=<seed> reruns one failing seed with waves
soak: $(READY)
	@mkdir -p $(REPORTS)
	$(PY) -m scripts.soak $(subst $(comma), ,$(CAMPAIGN)) $(if $(COUNT),--count $(COUNT)) \
		$(if $(HOURS),--hours $(HOURS)) $(if $(SHARD),--shard $(SHARD)) $(if $(SEED),--seed $(SEED)) \
		$(if $(RERUN),--rerun $(RERUN)) $(if $(PER_SEED),--per-seed $(PER_SEED))

clean:
	rm -rf sim_build

distclean: clean
	rm -rf $(VENV) *.egg-info
