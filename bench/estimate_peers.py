"""What DeepSpeed's and Accelerate's memory estimators say for one of dtrain's model presets.

The Hugging Face equivalent of the preset is built on the meta device (no weights), then:
- DeepSpeed 0.19's estimate_zero2_model_states_mem_needs and estimate_zero3_model_states_mem_needs
  (the functions behind the *_all_cold printers), without offload, for the given GPUs on one node;
- Accelerate 1.15's `accelerate estimate-memory` numbers, from the same functions its command calls
  (calculate_maximum_sizes, estimate_training_usage): the command itself needs the Hugging Face Hub,
  which the benchmark machine cannot reach.
Prints one JSON object (bytes per rank). Usage: estimate_peers.py PRESET GPUS
"""
import json
import logging
import sys

import torch
from accelerate.commands.estimate import estimate_training_usage
from accelerate.utils import calculate_maximum_sizes
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs  # noqa: E402
from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs  # noqa: E402

preset, gpus = sys.argv[1], int(sys.argv[2])
with torch.device("meta"):  # tied weights stay tied, unlike under accelerate's init_empty_weights
    if preset == "gpt2-124m":
        model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257))
    elif preset == "llama-1b":
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                                             hidden_size=2048, intermediate_size=8192, vocab_size=128256,
                                             max_position_embeddings=2048, tie_word_embeddings=True))
    else:
        sys.exit(f"estimate_peers.py: no Hugging Face equivalent for preset {preset!r}")
params = sum(p.numel() for p in model.parameters())
total_size, largest = calculate_maximum_sizes(model)  # fp32 bytes of the model and of its largest layer
largest_params = largest[0] // 4
_, zero2 = estimate_zero2_model_states_mem_needs(params, num_gpus_per_node=gpus, cpu_offload=False)
_, zero3, _ = estimate_zero3_model_states_mem_needs(params, largest_params, num_gpus_per_node=gpus,
                                                   cpu_offload=False, cpu_offload_params=False)
accelerate = {dtype: max(estimate_training_usage(total_size, dtype).values()) for dtype in ("float32", "bfloat16")}
print(json.dumps({"parameters": params, "largest_layer_parameters": largest_params, "deepspeed_zero2": zero2,
                  "deepspeed_zero3": zero3, "accelerate_float32": accelerate["float32"],
                  "accelerate_bfloat16": accelerate["bfloat16"]}))
