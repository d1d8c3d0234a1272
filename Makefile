# The two commands of README.md:  `make demo`  and  `make test`  (each sets up what it needs first).
.PHONY: demo test test-fast test-engine test-editors setup setup-all dist
SHELL := /bin/bash

setup:
	scripts/setup.sh core

setup-all:
	scripts/setup.sh all

demo: setup
	.venv/bin/quickcode demo

# The whole suite, as CI runs it (.ci/run calls exactly this).
test: setup-all
	.venv/bin/python -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder

test-fast: setup
	.venv/bin/python -m pytest -q -m "not engine and not editor and not pipeline and not slow"

test-engine: setup
	.venv/bin/python -m pytest -q -m engine

test-editors: setup-all
	.venv/bin/python -m pytest -q -m editor

# The installable artefacts in dist/: the language-server wheel, the full wheel, the VS Code .vsix.
dist:
	scripts/build_dists.sh
