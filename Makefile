# distdeck: `make run` serves the deck, `make test` runs every test.
# Each target installs what it needs first; `make install` is idempotent.

VENV    := .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
VENDOR  := static/vendor
VSTAMP  := $(VENDOR)/.installed
HOST    ?= 127.0.0.1
PORT    ?= 8000

.PHONY: install run test test-fast bench export lint clean image

install: $(STAMP) $(VSTAMP)

# Python: a venv with the CPU build of torch (pinned in pyproject.toml) and the package.
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# Front end: npm packages, their dist files copied into static/vendor (git-ignored).
$(VSTAMP): package.json package-lock.json scripts/vendor.sh
	npm ci --no-audit --no-fund
	sh scripts/vendor.sh node_modules $(VENDOR)
	touch $@

run: install
	$(VENV)/bin/distdeck serve --host $(HOST) --port $(PORT)

# Two pytest sessions side by side, one per core (scripts/test_side_by_side.py says which tests go where).
test: install
	$(PY) scripts/test_side_by_side.py -q -rs --durations=15

test-fast: install
	$(PY) -m pytest -q -m "not browser and not slow"

bench: install
	$(PY) -m bench

export: install
	$(VENV)/bin/distdeck export export

# The container image `distdeck`, with docker or podman; see scripts/image.sh.
image:
	scripts/image.sh

clean:
	rm -rf $(VENV) node_modules $(VENDOR) *.egg-info
