// Gloo or NCCL behind one call (see communicator_factory.h).
#include "executor/comm/communicator_factory.h"

#include <stdexcept>

#include "planner/names.h"

#if MESHPLAN_WITH_NCCL
#include "executor/comm/nccl_communicator.h"
#endif

namespace meshplan {

const char* ToString(CommBackend backend) {
  return backend == CommBackend::kNccl ? "nccl" : "gloo";
}

bool ParseCommBackend(const std::string& text, CommBackend* backend) {
  const std::string lower = Lower(text);
  if (lower == "gloo") *backend = CommBackend::kGloo;
  else if (lower == "nccl") *backend = CommBackend::kNccl;
  else return false;
  return true;
}

bool NcclBuiltIn() {
#if MESHPLAN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> MakeCommunicator(CommBackend backend,
                                               c10::intrusive_ptr<c10d::Store> store,
                                               int world_rank, std::vector<int> members,
                                               std::string name, const CommOptions& options) {
  if (backend == CommBackend::kGloo)
    return std::make_unique<GlooCommunicator>(std::move(store), world_rank, std::move(members),
                                              std::move(name), options.gloo);
#if MESHPLAN_WITH_NCCL
  NcclOptions nccl;
  nccl.device = options.cuda_device;
  nccl.timeout = options.nccl_timeout;
  nccl.compute_stream = options.cuda_compute_stream;
  return std::make_unique<NcclCommunicator>(std::move(store), world_rank, std::move(members),
                                            std::move(name), nccl);
#else
  throw std::runtime_error(
      "group '" + name + "': the NCCL backend is not in this build (it needs the CUDA toolkit "
      "and NCCL at configure time: -DMESHPLAN_WITH_CUDA=ON and -DNCCL_ROOT=<dir with "
      "include/nccl.h>); use the gloo backend");
#endif
}

GroupFactory MakeGroupFactory(CommBackend backend, c10::intrusive_ptr<c10d::Store> store,
                              int world_rank, CommOptions options) {
  return [=](const std::string& name, const std::vector<int>& members) {
    return MakeCommunicator(backend, store, world_rank, members, name, options);
  };
}

}  // namespace meshplan
