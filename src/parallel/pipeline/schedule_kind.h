// The pipeline schedules dtrain runs, by the names parallel.pipeline.schedule takes.
#pragma once
#include "common/enum_names.h"

namespace dtrain {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved1F1B, ZeroBubble };

inline constexpr EnumNames<ScheduleKind, 4> kScheduleNames{{
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved1F1B, "interleaved_1f1b"},
    {ScheduleKind::ZeroBubble, "zero_bubble"},
}};

inline std::string schedule_name(ScheduleKind kind) { return name_in(kScheduleNames, kind); }
// nullopt for a name that is none of kScheduleNames'.
inline std::optional<ScheduleKind> schedule_kind(const std::string& name) { return value_named(kScheduleNames, name); }
// "gpipe, 1f1b, interleaved_1f1b, zero_bubble": for errors.
inline std::string schedule_names() { return names_listed(kScheduleNames); }

}  // namespace dtrain
