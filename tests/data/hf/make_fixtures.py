# Makes the tiny Hugging Face checkpoints under tests/data/hf and the logits transformers computes
# for them on a fixed input (README.md says how to run it). Run once; the outputs are committed.
import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

INPUT_IDS = torch.tensor([[1, 17, 200, 3, 99, 45, 0, 255, 128, 64, 7, 31]])


def randomize(model):
    # Every tensor random, norms around 1 and biases non-zero, so a misplaced or untransposed
    # tensor changes the logits.
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln" in name or "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p)) if name.endswith("weight") else p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))


def save(model, out, **kwargs):
    model.eval()
    model.save_pretrained(out, safe_serialization=True, **kwargs)
    with torch.no_grad():
        logits = model(INPUT_IDS).logits.float().contiguous()
    save_file({"input_ids": INPUT_IDS, "logits": logits}, f"{out}/logits.safetensors")


gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=32, n_embd=32, n_layer=2, n_head=2, layer_norm_epsilon=1e-5,
                                  attn_implementation="eager"))
randomize(gpt2)
save(gpt2, "gpt2")

llama = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, max_position_embeddings=32, rms_norm_eps=1e-6, rope_theta=1000.0,
                                     tie_word_embeddings=False, attn_implementation="eager"))
randomize(llama)
save(llama, "llama-gqa", max_shard_size="60KB")  # sharded, with model.safetensors.index.json
