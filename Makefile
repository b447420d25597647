# The two commands of the quick start. Both install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all setup build test demo demo-vlm cuda clean
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

# The vision-language demo: the OCR model on the built-in rendered lines on two local ranks, then
# held-out lines read back beside their text, with the character accuracy. Each run starts afresh.
VLM_DEMO_DIR ?= runs/vlm-ocr
demo-vlm: build
	$(BUILD)/dtrain run --nproc-per-node 2 --no-sample --config examples/vlm-ocr.json \
	  --set train.run_dir=$(VLM_DEMO_DIR) --set train.resume=never --set train.start_over=true
	$(BUILD)/dtrain generate --checkpoint $(VLM_DEMO_DIR)/ckpt --held-out 8

# The CUDA variant, against the same wheel's libtorch_cuda with the machine's CUDA 13 toolkit, cuDNN
# and NCCL. It compiles and links without a GPU; scripts/gpu-check.sh runs it on one.
cuda:
	@scripts/setup.sh --cuda
	@PATH=$$PATH:/usr/local/cuda/bin cmake -S . -B $(BUILD)-cuda -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON >/dev/null
	@cmake --build $(BUILD)-cuda -j $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD)-cuda
