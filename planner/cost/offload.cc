#include "planner/cost/offload.h"

#include <algorithm>

#include "planner/cost/step_work.h"

namespace meshplan {

double HostUpdatedBytesPerParam(const BytesPerParam& bytes) {
  const bool fp32_master = bytes.optimizer > 2 * bytes.state;  // master + m + v
  return bytes.optimizer + (fp32_master ? 0.0 : bytes.param);
}

double HostOptimizerBytesPerParam(const BytesPerParam& bytes) {
  return HostUpdatedBytesPerParam(bytes) + bytes.grad;
}

double HostCopyTime(double bytes, const HostSpec& host) {
  if (bytes <= 0) return 0;
  const double rate = host.link.bus_bandwidth_Bps();
  return rate > 0 ? host.link.latency_s + bytes / rate : 0;
}

OffloadTimes StageOffloadTimes(const StepWork& work, const StageParts& parts,
                               const HostSpec& host, double forward_s, double backward_s) {
  OffloadTimes t;
  const OffloadWork& o = work.offload;
  if (o.activations) {
    // (T, ...) saved tensors of the stage's blocks, one micro-batch: out during the forward,
    // back in during the backward.
    const double copy = HostCopyTime(static_cast<double>(parts.blocks) * o.activation_bytes_per_block, host);
    t.forward_exposed_s = std::max(0.0, copy - forward_s);
    t.backward_exposed_s = std::max(0.0, copy - backward_s);
  }
  if (o.optimizer) {
    const double params = static_cast<double>(parts.blocks * work.block.params +
                                              (parts.embedding ? work.embedding.params : 0) +
                                              (parts.head ? work.head.params : 0));
    const double shard = params / static_cast<double>(work.zero_shards);
    const double grads_out = HostCopyTime(shard * static_cast<double>(work.grad_bytes), host);
    // offload_params: the updated shard stays on the host (gathered from there next step).
    const double params_in =
        o.params ? 0.0 : HostCopyTime(shard * static_cast<double>(work.param_bytes), host);
    t.step_exposed_s = std::max(0.0, grads_out - backward_s) + params_in;
    t.cpu_optimizer_s =
        host.optimizer_Bps > 0 ? shard * o.host_state_bytes_per_param / host.optimizer_Bps : 0;
  }
  return t;
}

std::string MissingHostField(const ClusterSpec& cluster, const ParallelPlan& plan) {
  if (!plan.offloads()) return "";
  const HostSpec& h = cluster.host;
  if (h.memory_bytes_per_node <= 0) return "host.memory_GB_per_node";
  if (h.link.bandwidth_Bps <= 0) return "host.link.bandwidth_GBps";
  if (plan.offload_optimizer && h.optimizer_Bps <= 0) return "host.optimizer_GBps";
  return "";
}

}  // namespace meshplan

namespace meshplan {

void RequireHostData(const ClusterSpec& cluster, const ParallelPlan& plan,
                     const InputLocation& where) {
  const std::string field = MissingHostField(cluster, plan);
  if (field.empty()) return;
  const std::string keys = std::string(plan.offload_optimizer ? "offload_opt=1 " : "") +
                           (plan.offload_activations ? "offload_act=1 " : "") +
                           (plan.offload_params ? "offload_params=1 " : "");
  throw InputError(where, field,
                   "missing: the plan offloads (" + keys.substr(0, keys.size() - 1) +
                       ") but cluster '" + cluster.name + "' (GPU '" + cluster.gpu.name +
                       "') has no " + field +
                       "; add a host: block {memory_GB_per_node, link: {bandwidth_GBps, "
                       "latency_us, bus_efficiency}, optimizer_GBps} to the cluster file or to "
                       "the GPU's hardware file (configs/hardware/a100-80gb.yaml has one)");
}

}  // namespace meshplan
