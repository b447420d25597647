// A simulated pipeline step as a text Gantt chart: one row per rank, one character per column of
// time. F shows its micro-batch (0-9, then a-z, A-Z), B is '=', I '-', W '+', idle '.'.
#pragma once
#include <string>
#include <vector>

#include "parallel/pipeline/pipeline_simulator.h"

namespace dtrain {

struct GanttChart {
  std::vector<std::string> rows;  // one per rank, `columns` characters
  double column_time = 1;         // the time one column stands for
};

// One column per time unit when every action starts and ends on a whole unit and the step is at most
// `max_columns` long; otherwise `max_columns` columns, each showing what runs at its middle.
GanttChart gantt_chart(const PipelineTimeline& timeline, int max_columns = 100);

// "0-9a-zA-Z: F of that micro-batch, =: B, -: I (input gradient), +: W (weight gradient), .: idle".
std::string gantt_legend();

}  // namespace dtrain
