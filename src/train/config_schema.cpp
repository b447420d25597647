#include "train/config_schema.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace dtrain {

const nlohmann::json& config_defaults() {
  static const nlohmann::json defaults = nlohmann::json::parse(R"({
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": 0.0,
    "steps_per_print": 10,
    "wall_clock_breakdown": false,
    "optimizer": {"type": "AdamW", "params": {}},
    "scheduler": {"type": "constant", "params": {}},
    "fp16": {"enabled": false, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
             "hysteresis": 2, "consecutive_hysteresis": false, "min_loss_scale": 1, "auto_cast": false},
    "bf16": {"enabled": false},
    "data_types": {"grad_accum_dtype": null},
    "zero_optimization": {"stage": 0, "reduce_bucket_size": 6250000, "allgather_bucket_size": 500000000,
                          "overlap_comm": true, "contiguous_gradients": true, "reduce_scatter": true,
                          "allgather_partitions": true, "round_robin_gradients": false, "sub_group_size": "auto",
                          "offload_optimizer": {"device": "none", "nvme_path": null, "pin_memory": false, "buffer_count": 4,
                                                "buffer_size": 100000000, "max_in_cpu": 1000000000, "fast_init": false, "ratio": 1.0},
                          "offload_param": {"device": "none", "nvme_path": null, "pin_memory": false, "buffer_count": 5,
                                            "buffer_size": 100000000, "max_in_cpu": 1000000000, "fast_init": false, "ratio": 1.0},
                          "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                          "stage3_max_live_parameters": 1000000000, "stage3_max_reuse_distance": 1000000000,
                          "stage3_gather_16bit_weights_on_model_save": false},
    "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": false,
                                 "contiguous_memory_optimization": false, "number_checkpoints": null,
                                 "synchronize_checkpoint_boundary": false, "profile": false},
    "model": {"preset": "demo", "arch": null, "n_layer": null, "n_head": null, "n_kv_head": null, "d_model": null,
              "d_ff": null, "seq_len": null, "vocab_size": null, "tie_embeddings": null, "norm_eps": null,
              "rope_theta": null, "init_from": "",
              "vision": {"n_layer": null, "n_head": null, "d_model": null, "d_ff": null, "patch_size": null, "channels": null,
                         "max_grid": null, "merge": null, "image_token_id": null, "end_token_id": null,
                         "token_order": null}},
    "data": {"source": "builtin", "tokenizer": "", "val_fraction": 0.05, "shuffle": true, "shuffle_order": "auto",
             "max_image_tokens": 256, "max_image_pixels": 16777216, "skip_bad_samples": false, "ocr_random_lines": 0},
    "train": {"steps": 300, "stop_at_step": 0, "seed": 1234, "deterministic": false, "trace": false, "profile_steps": [], "resume": "auto", "start_over": false, "freeze": [], "run_dir": "",
              "threads": 0, "activation_checkpointing": "none", "eval_every": 100, "eval_samples": 64, "spike_factor": 5.0, "spike_window": 50,
              "skip_spikes": false, "divergence_steps": 10, "on_divergence": "stop", "rollback_lr_factor": 0.5,
              "max_rollbacks": 3, "peak_flops": 0.0, "memory_budget": "auto", "inject_failure": []},
    "parallel": {"dp": "auto", "tp": 1, "pp": 1, "cp": 1, "sequence_parallel": false, "tp_overlap_grad_reduce": true,
                 "pipeline": {"schedule": "1f1b", "virtual_stages": 1, "split": null}, "context": {"impl": "ring"},
                 "micro_batches": "auto", "modules": {}, "fsdp": {"sharding_strategy": null, "reshard_after_forward": null,
                 "shard_group_size": "auto", "param_dtype": "fp32"}},
    "checkpoint": {"dir": "", "every_steps": 0, "every_hours": 0.0, "keep": 2, "save_at_end": true, "async": false},
    "elastic": {"batch_policy": "keep"},
    "dist": {"backend": "auto", "timeout_s": 300}
  })");
  return defaults;
}

bool is_free_form(const std::string& path) {
  static const std::vector<std::string> free = {"optimizer.params", "scheduler.params", "parallel.modules"};
  return std::find(free.begin(), free.end(), path) != free.end();
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void collect_keys(const nlohmann::json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string path = prefix.empty() ? it.key() : prefix + "." + it.key();
    out.push_back(path);
    if (it.value().is_object() && !is_free_form(path)) collect_keys(it.value(), path, out);
  }
}

}  // namespace

std::string nearest_known_key(const std::string& key) {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> keys;
    collect_keys(config_defaults(), "", keys);
    return keys;
  }();
  std::string best;
  size_t best_distance = std::max<size_t>(3, key.size() / 3) + 1;
  // The last components are compared too, so a key in the wrong section ("steps") finds its home
  // ("train.steps").
  auto last = [](const std::string& k) { return k.substr(k.find_last_of('.') + 1); };
  for (const auto& k : known) {
    const size_t d = std::min(edit_distance(key, k), edit_distance(last(key), last(k)) + 1);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best;
}

std::string nearest_of(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

}  // namespace dtrain
