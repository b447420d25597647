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

# The demo: the default model on the built-in corpus on two local ranks, then a sample.
demo: build
	$(BUILD)/dtrain run

clean:
	rm -rf $(BUILD)
