# clusterdoctor — two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
STAMP_RUN  := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: run test test-clock test-clock-serial clock-guard lint bench clean deploy-generate podresources-proto gpu-check screenshots

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP_RUN): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e .
	touch $@

$(STAMP_TEST): pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) install -q -c constraints.txt -e '.[dev,training,hta,sim]'
	touch $@ $(STAMP_RUN)

# Exit 1 from diagnose means "findings at or above --fail-on": a report, not a failed make.
run: $(STAMP_RUN)
	@$(BIN)/clusterdoctor diagnose; rc=$$?; [ $$rc -le 1 ]

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

# Two passes: the parallel-safe tests on $(JOBS) workers, then the ones that measure real time or inject
# real faults alone (marker `serial`, tests/conftest.py). `make test JOBS=1` runs both one test at a time.
JOBS   ?= 2
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider --timeout 600
# Both passes always run (a failure in the first does not hide the second); each says how it ended
# and make fails if either failed.
test: $(STAMP_TEST) lint
	@$(PYTEST) -n $(JOBS) -m "not serial"; a=$$?; \
	  $(PYTEST) -m serial; b=$$?; \
	  echo "make test: parallel pass exit $$a, serial pass exit $$b"; \
	  [ $$a -eq 0 ] && [ $$b -eq 0 ]

# No test may depend on the date or the time zone: the suite again with the clock a year ahead
# (libfaketime, Debian package `faketime`, inherited by every child process) in UTC+8. `.ci/run` runs it.
# Only the parallel pass: the serial tests talk to Go programs (Prometheus, etcd, node exporter) that
# read the kernel's clock and ignore libfaketime, so under it they run with two clocks a year apart,
# which no real machine has (CI failed on that: a certificate a year ahead, an Event.wait that never
# returned), and they take half the suite's time. Every parser, rule and report runs in this pass.
# `make test-clock-serial` runs the serial pass under the fake clock as well, by hand.
FAKE_OFFSET ?= +365d
FAKE_TZ     ?= Asia/Shanghai
FAKE        := TZ=$(FAKE_TZ) faketime -f '$(FAKE_OFFSET)'
clock-guard:
	@command -v faketime >/dev/null || { echo "test-clock needs faketime (apt-get install faketime)"; exit 2; }
	@y=$$(date -u +%Y); fy=$$(faketime -f '$(FAKE_OFFSET)' date -u +%Y); \
	  [ "$$fy" -gt "$$y" ] || { echo "faketime did not move the clock ($$y -> $$fy)"; exit 2; }; \
	  echo "clock guard: suite at $$($(FAKE) date -Iseconds)"
test-clock: $(STAMP_TEST) clock-guard
	@$(FAKE) $(PYTEST) -n $(JOBS) -m "not serial"; a=$$?; \
	  echo "make test-clock: parallel pass exit $$a (serial pass: make test-clock-serial)"; \
	  [ $$a -eq 0 ]
test-clock-serial: $(STAMP_TEST) clock-guard
	@$(FAKE) $(PYTEST) -m serial

bench: $(STAMP_TEST)
	for f in bench/[!_]*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Every GPU-dependent check in one run (tools/gpu_check.py: nvidia-smi captures parsed, NVML live, the
# NUMA latency probe, the fail-slow probe and sync hooks on CUDA with one injected fault), <= ~8 min on
# one GPU; results and raw captures in out/gpu-check-<time>/. Without a GPU it says so and exits 0.
gpu-check: $(STAMP_TEST)
	$(BIN)/python tools/gpu_check.py $(GPU_CHECK_ARGS)

# docs/screenshots/: every HTML report kind as headless Chromium draws it at 1280 px (Debian `chromium`)
screenshots: $(STAMP_TEST)
	CLUSTERDOCTOR_SCREENSHOTS=docs/screenshots $(BIN)/python -m pytest -q -p no:cacheprovider tests/report/test_html_browser.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info

# deploy/: alert rules, PrometheusRule, promtool tests and the Grafana dashboard are generated from the
# rule catalogue; tests/deploy fails when the committed files differ from what this writes.
deploy-generate: $(STAMP_TEST)
	$(BIN)/clusterdoctor rules --format prometheus > deploy/components/prometheus-config/clusterdoctor-rules.yaml
	$(BIN)/clusterdoctor rules --format prometheus-operator > deploy/components/prometheusrule/prometheusrule.yaml
	$(BIN)/clusterdoctor rules --format promtool-tests > deploy/prometheus-tests/clusterdoctor-rules.test.yaml
	$(BIN)/python -m clusterdoctor.report.dashboard > deploy/components/grafana-dashboard/clusterdoctor.json

# The kubelet pod-resources gRPC code, from the vendored api.proto (needs grpcio-tools, pinned).
podresources-proto: $(STAMP_TEST)
	$(BIN)/python -m clusterdoctor.observe.node.podresources_v1._generate
