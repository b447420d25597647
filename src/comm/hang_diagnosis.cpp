#include "comm/hang_diagnosis.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "common/store_bytes.h"

namespace dtrain {
namespace {

constexpr const char* kRequests = "diag/requests";
constexpr auto kPollInterval = std::chrono::milliseconds(200);

// The entries a rank reported for one group, oldest first.
std::vector<CollectiveRecord> entries_of(const RankReport& report, const std::string& group_key) {
  std::vector<CollectiveRecord> out;
  if (!report.groups.contains(group_key)) return out;
  for (const auto& e : report.groups[group_key]["entries"]) out.push_back(record_from_json(e));
  return out;
}

bool same_op(const CollectiveRecord& a, const CollectiveRecord& b) {
  return a.op == b.op && a.shape == b.shape && a.dtype == b.dtype;
}

std::string short_error(const std::string& e) {
  std::string first = e.substr(0, e.find('\n'));
  return first.size() > 200 ? first.substr(0, 200) + "..." : first;
}

}  // namespace

std::string format_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s << (i ? "," : "") << ranks[i];
    if (j > i) s << "-" << ranks[j];
    i = j + 1;
  }
  return s.str();
}

std::string explain_failure(const FailedCollective& f, const std::map<int, RankReport>& reports) {
  const int64_t seq = f.op.seq;
  std::vector<int> waiting, completed, silent;
  std::vector<std::string> never, mismatched, finished;
  for (int r : f.ranks) {
    auto it = reports.find(r);
    if (it == reports.end() || !it->second.answered) {
      if (r != f.failing_rank) silent.push_back(r);
      continue;
    }
    const auto entries = entries_of(it->second, f.group_key);
    auto at_seq = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.seq == seq; });
    const CollectiveRecord* last = nullptr;
    for (const auto& e : entries)
      if (e.seq > 0 && (!last || e.seq > last->seq)) last = &e;
    const std::string last_op = last ? last->describe() : "none";
    if (at_seq == entries.end()) {
      std::ostringstream s;
      s << "rank " << r << (it->second.finished ? " had finished and " : " ") << "never entered " << f.op.op << " #"
        << seq << "; rank " << r << "'s last op on group " << f.group_name << " was " << last_op;
      never.push_back(s.str());
    } else if (!same_op(*at_seq, f.op)) {
      mismatched.push_back("rank " + std::to_string(r) + " entered " + at_seq->describe());
    } else if (at_seq->state == OpState::Completed) {
      completed.push_back(r);
    } else {
      waiting.push_back(r);
    }
  }

  std::ostringstream msg;
  msg << f.op.op << " #" << seq << " on group " << f.group_name << " (ranks " << format_ranks(f.ranks) << ") failed on rank "
      << f.failing_rank << " after " << static_cast<int>(f.waited_s * 10) / 10.0 << "s";
  if (!mismatched.empty()) {
    msg << ": mismatch at #" << seq << " on group " << f.group_name << ": rank " << f.failing_rank << " entered "
        << f.op.describe();
    for (const auto& m : mismatched) msg << ", " << m;
  }
  for (const auto& n : never) msg << ": " << n;
  if (!waiting.empty()) msg << "; rank" << (waiting.size() > 1 ? "s " : " ") << format_ranks(waiting)
                            << (waiting.size() > 1 ? " are" : " is") << " waiting there";
  if (!completed.empty()) msg << "; rank" << (completed.size() > 1 ? "s " : " ") << format_ranks(completed)
                              << " completed it";
  if (!silent.empty()) msg << "; rank" << (silent.size() > 1 ? "s " : " ") << format_ranks(silent)
                           << " did not answer (dead, or stuck outside dtrain collectives)";
  if (mismatched.empty() && never.empty() && silent.empty())
    msg << "; every rank entered it (the backend or the network failed, not the program)";
  msg << " [backend: " << short_error(f.backend_error) << "]";
  return msg.str();
}

HangDiagnosis::HangDiagnosis(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> responder_store,
                             int rank, std::shared_ptr<CollectiveLog> log)
    : store_(std::move(store)), responder_store_(std::move(responder_store)), rank_(rank), log_(std::move(log)) {
  responder_ = std::thread([this] { respond_loop(); });
}

HangDiagnosis::~HangDiagnosis() {
  stop_ = true;
  if (responder_.joinable()) responder_.join();
  try {
    store_->set("diag/final/" + std::to_string(rank_), as_bytes(log_->to_json().dump()));
  } catch (const std::exception&) {
    // The store host may already be gone at shutdown; a final record is a courtesy, not a duty.
  }
}

std::string HangDiagnosis::record_key(int64_t request, int rank) const {
  return "diag/records/" + std::to_string(request) + "/" + std::to_string(rank);
}

void HangDiagnosis::respond_loop() {
  int64_t answered = 0;
  while (!stop_) {
    std::this_thread::sleep_for(kPollInterval);
    try {
      const int64_t latest = responder_store_->add(kRequests, 0);
      for (int64_t req = answered + 1; req <= latest; ++req)
        responder_store_->set(record_key(req, rank_), as_bytes(log_->to_json().dump()));
      answered = latest;
    } catch (const std::exception&) {
      // The store went away (the job is ending): nothing left to answer.
      return;
    }
  }
}

std::string HangDiagnosis::diagnose(FailedCollective f, std::chrono::milliseconds answer_timeout) {
  std::map<int, RankReport> reports;
  reports[f.failing_rank] = {true, false, log_->to_json()};
  try {
    const int64_t req = store_->add(kRequests, 1);
    store_->set(record_key(req, rank_), as_bytes(reports[f.failing_rank].groups.dump()));
    const auto deadline = std::chrono::steady_clock::now() + answer_timeout;
    std::vector<int> pending;
    for (int r : f.ranks)
      if (r != f.failing_rank) pending.push_back(r);
    while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
      std::vector<int> still;
      for (int r : pending) {
        if (store_->check({record_key(req, r)})) {
          reports[r] = {true, false, nlohmann::json::parse(as_string(store_->get(record_key(req, r))))};
        } else if (store_->check({"diag/final/" + std::to_string(r)})) {
          reports[r] = {true, true,
                        nlohmann::json::parse(as_string(store_->get("diag/final/" + std::to_string(r))))};
        } else {
          still.push_back(r);
        }
      }
      pending.swap(still);
      if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    f.backend_error += " (diagnosis could not reach the store: " + short_error(e.what()) + ")";
  }
  return explain_failure(f, reports);
}

}  // namespace dtrain
