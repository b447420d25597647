#pragma once

namespace dtrain {

// `dtrain export --checkpoint DIR --format hf --out OUT`: a checkpoint as a Hugging Face model (hf/hf_export.h).
int export_command(int argc, char** argv);

}  // namespace dtrain
