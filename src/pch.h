// Precompiled header shared by every module: LibTorch's headers are most of the compile time.
#pragma once
#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <nlohmann/json.hpp>
