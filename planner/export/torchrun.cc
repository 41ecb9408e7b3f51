// The `torchrun` target: meshplan's own executor (`meshplan run`) launched by torchrun, and
// an sbatch script that launches it with srun, as docs/executor.md ("Launching") describes
// the rank environments (executor/launch/rank_env.h). A plan `meshplan run` refuses
// (planner/executor_support.h) is refused here, with the executor's reason.
#include <fmt/format.h>

#include <string>

#include "planner/executor_support.h"
#include "planner/export/export_rules.h"
#include "planner/input_error.h"

namespace meshplan {

std::string ExportTorchrun(const ExportJob& job) {
  const std::vector<std::string> limits = ExecutorLimitations(job.file);
  if (!limits.empty())
    throw InputError(
        {job.plan_path}, "plan",
        "cannot be expressed in torchrun (meshplan run refuses it): " + limits.front());
  const int64_t nodes = job.file.cluster.nodes;
  const int64_t gpus = job.file.cluster.gpus_per_node;
  const std::string run = "meshplan run " + ShellWord(job.plan_path) + " --out measured.json";
  const std::string rendezvous = nodes == 1 ? "--standalone"
                                            : fmt::format(
                                                  "--nnodes {} --rdzv-backend c10d --rdzv-endpoint "
                                                  "\"$MASTER_ADDR:29500\"",
                                                  nodes);
  return fmt::format(
      "#!/bin/bash\n"
      "# meshplan export --to torchrun: {path} ({plan})\n"
      "# meshplan's executor on {nodes} node(s) x {gpus} GPUs, one rank per GPU.\n"
      "# With torchrun, on every node (MASTER_ADDR: the first node's address):\n"
      "#   torchrun {rendezvous} --nproc-per-node {gpus} --no-python {run_comment}\n"
      "# With Slurm: sbatch this file (srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID).\n"
      "#SBATCH --job-name=meshplan-run\n"
      "#SBATCH --nodes={nodes}\n"
      "#SBATCH --ntasks-per-node={gpus}\n"
      "#SBATCH --gpus-per-node={gpus}\n"
      "set -euo pipefail\n"
      "export MASTER_ADDR=\"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\"\n"
      "export MASTER_PORT=\"${{MASTER_PORT:-29500}}\"\n"
      "srun --cpu-bind=cores {run}\n",
      fmt::arg("path", CommentText(ShellWord(job.plan_path))),
      fmt::arg("plan", ToPlanString(job.plan())), fmt::arg("nodes", nodes), fmt::arg("gpus", gpus),
      fmt::arg("rendezvous", rendezvous), fmt::arg("run_comment", CommentText(run)),
      fmt::arg("run", run));
}

}  // namespace meshplan
