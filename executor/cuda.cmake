# CUDA runtime and NCCL for the executor (included by executor/CMakeLists.txt).
#
# With MESHPLAN_WITH_CUDA and the CUDA toolkit found, meshplan_executor links the CUDA
# runtime (MESHPLAN_WITH_CUDA_RUNTIME=1: device queries, executor/device/cuda_device.h); when
# nccl.h and libnccl are found too it also gets the NCCL communicator
# (MESHPLAN_WITH_NCCL=1, executor/comm/nccl_communicator.cc). Neither needs a LibTorch with
# CUDA: the communicator uses the runtime API on raw device pointers.
# NCCL is searched in NCCL_ROOT (CMake or environment variable; e.g. the PyTorch wheel's
# nvidia/nccl folder, see docs/executor.md), then beside the CUDA toolkit.
if(NOT MESHPLAN_WITH_CUDA)
  return()
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "meshplan: CUDA toolkit not found: no NCCL communicator")
  return()
endif()
target_link_libraries(meshplan_executor PUBLIC CUDA::cudart)
target_compile_definitions(meshplan_executor PUBLIC MESHPLAN_WITH_CUDA_RUNTIME=1)

set(NCCL_ROOT "$ENV{NCCL_ROOT}" CACHE PATH "Folder holding include/nccl.h and lib/libnccl.so*")
find_path(MESHPLAN_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES include)
# The wheel ships only libnccl.so.2 (no unversioned link), hence the second name; NAMES_PER_DIR
# so NCCL_ROOT's libnccl.so.2 wins over an unversioned libnccl.so beside the toolkit.
find_library(MESHPLAN_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
  HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib lib64)
if(NOT MESHPLAN_NCCL_INCLUDE_DIR OR NOT MESHPLAN_NCCL_LIBRARY)
  message(STATUS "meshplan: NCCL not found (set NCCL_ROOT): no NCCL communicator")
  return()
endif()
message(STATUS "meshplan: NCCL communicator with ${MESHPLAN_NCCL_LIBRARY}")
target_sources(meshplan_executor PRIVATE ${CMAKE_CURRENT_LIST_DIR}/comm/nccl_communicator.cc)
target_include_directories(meshplan_executor PUBLIC ${MESHPLAN_NCCL_INCLUDE_DIR})
target_link_libraries(meshplan_executor PUBLIC ${MESHPLAN_NCCL_LIBRARY})
target_compile_definitions(meshplan_executor PUBLIC MESHPLAN_WITH_NCCL=1)
