#include "tools/gantt_chart.h"

#include <cmath>

namespace dtrain {

namespace {

using Kind = PipelineAction::Kind;

constexpr char kMicroBatchDigits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

char cell(const PipelineAction& a) {
  switch (a.kind) {
    case Kind::Forward: return a.micro_batch < int(sizeof(kMicroBatchDigits)) - 1 ? kMicroBatchDigits[a.micro_batch] : '#';
    case Kind::Backward: return '=';
    case Kind::BackwardInput: return '-';
    case Kind::BackwardWeight: return '+';
    default: return '?';
  }
}

bool whole(double x) { return std::abs(x - std::round(x)) < 1e-9; }

}  // namespace

GanttChart gantt_chart(const PipelineTimeline& t, int max_columns) {
  bool whole_units = whole(t.makespan) && t.makespan <= max_columns;
  for (const auto& rank : t.ranks)
    for (const TimedAction& a : rank) whole_units = whole_units && whole(a.start) && whole(a.end);
  GanttChart chart;
  const int columns = whole_units ? int(std::round(t.makespan)) : max_columns;
  chart.column_time = columns > 0 ? t.makespan / columns : 1;
  for (const auto& rank : t.ranks) {
    std::string row(columns, '.');
    size_t a = 0;
    for (int c = 0; c < columns; ++c) {
      const double middle = (c + 0.5) * chart.column_time;
      while (a < rank.size() && rank[a].end <= middle) ++a;
      if (a < rank.size() && rank[a].start <= middle) row[c] = cell(rank[a].action);
    }
    chart.rows.push_back(row);
  }
  return chart;
}

std::string gantt_legend() {
  return "0-9a-zA-Z: F of that micro-batch (# beyond), =: B, -: I (input gradient), +: W (weight gradient), .: idle";
}

}  // namespace dtrain
