# The two commands of the quick start. Both install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all setup build test demo clean
all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Until `dtrain run` trains, the demo is a visible multi-rank self-check: two local ranks measure
# and verify every collective.
demo: build
	$(BUILD)/dtrain launch --nproc-per-node 2 -- $(BUILD)/dtrain bench-comm -e 4194304

clean:
	rm -rf $(BUILD)
