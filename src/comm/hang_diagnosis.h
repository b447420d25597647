// Turns a bare backend timeout into an explanation. When a collective fails on one rank, that rank
// asks every rank (through the store) for its collective record; a responder thread on each live
// rank answers, including the rank that skipped the op and is blocked elsewhere. Comparing the
// records at the failed sequence number says who never arrived, who is waiting, and who entered a
// different op.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "comm/collective_log.h"

namespace dtrain {

// What one rank reported about itself.
struct RankReport {
  bool answered = false;  // it answered the request
  bool finished = false;  // it had already shut its world down (the report is its final record)
  nlohmann::json groups;  // CollectiveLog::to_json() of that rank
};

struct FailedCollective {
  std::string group_key;   // unique id of the group (name plus members)
  std::string group_name;  // "dp", "world", ...
  std::vector<int> ranks;  // global ranks of the group
  int failing_rank = 0;
  CollectiveRecord op;     // what the failing rank entered
  double waited_s = 0;
  std::string backend_error;
};

// The explanation from the reports of the group's ranks (pure: unit-testable without processes).
std::string explain_failure(const FailedCollective& f, const std::map<int, RankReport>& reports);

// "0-2,5": a compact list of ranks.
std::string format_ranks(std::vector<int> ranks);

class HangDiagnosis {
 public:
  // `store` serves the failing rank's requests; `responder_store` is a separate connection that
  // the responder thread polls, so a rank blocked on `store` still answers.
  HangDiagnosis(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> responder_store, int rank,
                std::shared_ptr<CollectiveLog> log);
  // Posts this rank's final record (so a later failure elsewhere can say it finished) and stops
  // the responder.
  ~HangDiagnosis();

  // Collects the group's records (waiting at most `answer_timeout`) and explains the failure.
  std::string diagnose(FailedCollective f, std::chrono::milliseconds answer_timeout = std::chrono::seconds(3));

 private:
  void respond_loop();
  std::string record_key(int64_t request, int rank) const;

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> responder_store_;
  int rank_;
  std::shared_ptr<CollectiveLog> log_;
  std::atomic<bool> stop_{false};
  std::thread responder_;
};

}  // namespace dtrain
