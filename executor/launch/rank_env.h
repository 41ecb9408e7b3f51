// RankEnv: who this process is in a distributed run, read from the environment.
// Understands torchrun (and `meshplan run --nproc N`): RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT (a store client of the launcher's agent store when
// TORCHELASTIC_USE_AGENT_STORE=True); and Slurm (srun): SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID plus MASTER_ADDR and MASTER_PORT. RANK wins over SLURM_PROCID; Slurm
// variables alone, with neither MASTER_ADDR nor MASTER_PORT, do not make a rank process.
// Inconsistent values (RANK >= WORLD_SIZE, a missing or non-numeric variable, a
// port outside 1..65535) throw InputError naming the variable.
// The conventions in detail: docs/executor_internals.md#rank-env.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace meshplan {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  // the launcher hosts the store; rank 0 connects as a client
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT (store prefix under an agent store)
  std::string source;        // "torchrun" or "slurm", for messages
};

// Returns the value of an environment variable, or nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// The process environment (std::getenv).
EnvLookup ProcessEnv();

// nullopt when this process is not a rank of a distributed run (no RANK and no
// usable Slurm variables). Throws InputError when the variables are inconsistent.
std::optional<RankEnv> ReadRankEnv(const EnvLookup& env = ProcessEnv());

// True when `addr` names this host's loopback (localhost, 127.x.y.z, ::1).
bool IsLoopbackAddress(const std::string& addr);

}  // namespace meshplan
