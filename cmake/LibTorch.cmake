# LibTorch from the PyPI `torch` wheel that scripts/setup.sh installs into the project's .venv.
#
# Defines the target dtrain::torch. The CPU build links only libtorch_cpu and libc10: the wheel's
# TorchConfig.cmake cannot be used for it, because it demands the CUDA toolkit the wheel was built
# with. The CUDA build (-DDTRAIN_CUDA=ON) goes through TorchConfig.cmake, which finds the toolkit,
# cuDNN and NCCL and adds libtorch_cuda.
#
# DTRAIN_TORCH_DIR: the wheel's `torch` package folder; found in .venv when not given.

set(DTRAIN_TORCH_DIR "" CACHE PATH "The torch package folder of a PyPI wheel (.../site-packages/torch)")
if(NOT DTRAIN_TORCH_DIR)
  file(GLOB _torch_dirs "${CMAKE_SOURCE_DIR}/.venv/lib/python3*/site-packages/torch")
  list(LENGTH _torch_dirs _n)
  if(NOT _n EQUAL 1)
    message(FATAL_ERROR "LibTorch: expected one torch wheel under ${CMAKE_SOURCE_DIR}/.venv, found ${_n}. "
                        "Run scripts/setup.sh, or pass -DDTRAIN_TORCH_DIR=<site-packages>/torch.")
  endif()
  set(DTRAIN_TORCH_DIR "${_torch_dirs}" CACHE PATH "" FORCE)
endif()
if(NOT EXISTS "${DTRAIN_TORCH_DIR}/lib/libtorch_cpu.so")
  message(FATAL_ERROR "LibTorch: ${DTRAIN_TORCH_DIR}/lib/libtorch_cpu.so does not exist (DTRAIN_TORCH_DIR)")
endif()
file(STRINGS "${DTRAIN_TORCH_DIR}/version.py" _version_line REGEX "^__version__")
message(STATUS "LibTorch: ${DTRAIN_TORCH_DIR} (${_version_line})")

# The Gloo backend's header includes Gloo's headers, which the wheel does not ship (Gloo itself is
# compiled into libtorch_cpu). Debian's libgloo-dev provides them; dtrain only needs them to parse
# ProcessGroupGloo.hpp and never calls Gloo directly.
find_path(GLOO_INCLUDE_DIR gloo/algorithm.h)
if(NOT GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "Gloo's headers are missing (Debian package libgloo-dev; scripts/setup.sh installs it)")
endif()

add_library(dtrain_torch INTERFACE)
add_library(dtrain::torch ALIAS dtrain_torch)
target_include_directories(dtrain_torch SYSTEM INTERFACE "${GLOO_INCLUDE_DIR}")

if(DTRAIN_CUDA)
  list(APPEND CMAKE_PREFIX_PATH "${DTRAIN_TORCH_DIR}/share/cmake")
  find_package(Torch REQUIRED)
  # The CUDA wheel's libtorch.so exports a copy of std::filesystem that crashes when called
  # (remove_all jumps to a null pointer). Naming libstdc++ first puts it ahead of libtorch.so in the
  # executables' lookup order, so every std:: symbol binds to the C++ library's own.
  target_link_libraries(dtrain_torch INTERFACE stdc++ ${TORCH_LIBRARIES})
  # For code that reads CUDA-only APIs (the caching allocator's statistics, train/tensor_memory.cpp).
  target_compile_definitions(dtrain_torch INTERFACE DTRAIN_CUDA)
else()
  target_include_directories(dtrain_torch SYSTEM INTERFACE
    "${DTRAIN_TORCH_DIR}/include" "${DTRAIN_TORCH_DIR}/include/torch/csrc/api/include")
  target_link_libraries(dtrain_torch INTERFACE
    "${DTRAIN_TORCH_DIR}/lib/libtorch_cpu.so" "${DTRAIN_TORCH_DIR}/lib/libc10.so")
  # What the wheel was built with (Caffe2Targets.cmake): c10d with Gloo, the C++11 ABI.
  target_compile_definitions(dtrain_torch INTERFACE USE_DISTRIBUTED USE_C10D_GLOO _GLIBCXX_USE_CXX11_ABI=1)
endif()
