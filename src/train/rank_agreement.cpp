#include "train/rank_agreement.h"

#include "comm/collectives.h"
#include "common/store_bytes.h"
#include "train/train_config.h"

namespace dtrain {

std::string agree(World& world, const std::string& key, const std::function<std::string()>& decide) {
  auto store = world.store();
  if (world.rank() == 0) {
    try {
      const std::string value = decide();
      store->set(key, as_bytes("ok:" + value));
      return value;
    } catch (const ConfigError& e) {
      store->set(key, as_bytes(std::string("config:") + e.what()));
      throw;
    } catch (const std::exception& e) {
      store->set(key, as_bytes(std::string("error:") + e.what()));
      throw;
    }
  }
  const std::string reply = as_string(store->get(key));
  if (reply.rfind("ok:", 0) == 0) return reply.substr(3);
  const std::string why = "rank 0 failed, so this rank stops too: " + reply.substr(reply.find(':') + 1);
  if (reply.rfind("config:", 0) == 0) throw ConfigError(why);
  throw std::runtime_error(why);
}

std::vector<int> ranks_that_failed(World& world, bool ok, const std::string& what) {
  const auto mine = at::tensor({ok ? 1L : 0L}, at::kLong).to(world.device());
  const at::Tensor all = all_gather(*world.world_group(), mine, what + " outcome").cpu();
  std::vector<int> failed;
  for (int r = 0; r < world.size(); ++r)
    if (all[r].item<int64_t>() == 0) failed.push_back(r);
  return failed;
}

AgreeOnFailures ranks_that_failed_through_store(World& world, const std::string& what, std::chrono::milliseconds timeout) {
  const c10::intrusive_ptr<c10d::Store> store = world.another_store_connection();
  const int rank = world.rank(), size = world.size();
  auto calls = std::make_shared<int64_t>(0);
  return [=](bool ok) {
    const int64_t call = (*calls)++;
    auto key = [&](int64_t c, int r) { return what + "/" + std::to_string(c) + "/" + std::to_string(r); };
    store->set(key(call, rank), as_bytes(ok ? "ok" : "failed"));
    std::vector<int> failed;
    for (int r = 0; r < size; ++r) {
      try {
        store->wait({key(call, r)}, timeout);
      } catch (const std::exception&) {
        throw std::runtime_error(what + ": rank " + std::to_string(r) + " did not say within " + std::to_string(timeout.count() / 1000) +
                                 " s (dist.timeout_s) whether its part succeeded: it stopped or hangs");
      }
      if (as_string(store->get(key(call, r))) != "ok") failed.push_back(r);
    }
    // Every rank answered this call after it had read every answer of the one before: this rank's
    // answer to that one is read by all.
    if (call > 0) store->deleteKey(key(call - 1, rank));
    return failed;
  };
}

}  // namespace dtrain
