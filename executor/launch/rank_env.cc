#include "executor/launch/rank_env.h"

#include <charconv>
#include <cstdlib>

#include "planner/input_error.h"

namespace meshplan {
namespace {

const InputLocation kEnvironment{"<environment>"};

std::optional<std::string> Get(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string Require(const EnvLookup& env, const char* name, const std::string& why) {
  const auto value = Get(env, name);
  if (!value || value->empty()) throw InputError(kEnvironment, name, "is not set, " + why);
  return *value;
}

int ParseNonNegative(const char* name, const std::string& text) {
  int out = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  if (ec != std::errc() || ptr != end || out < 0)
    throw InputError(kEnvironment, name, "expected a non-negative integer, got '" + text + "'");
  return out;
}

// Fills master_addr / master_port and checks the rank numbers.
void FinishAndCheck(const EnvLookup& env, const char* rank_var, const char* world_var,
                    RankEnv& out) {
  const std::string why = "but " + std::string(rank_var) + " is (a " + out.source +
                          " rank needs MASTER_ADDR and MASTER_PORT for the rendezvous)";
  out.master_addr = Require(env, "MASTER_ADDR", why);
  out.master_port = ParseNonNegative("MASTER_PORT", Require(env, "MASTER_PORT", why));
  if (out.master_port < 1 || out.master_port > 65535)
    throw InputError(kEnvironment, "MASTER_PORT",
                     "must be a TCP port in 1..65535, got " + std::to_string(out.master_port));
  if (out.world_size < 1)
    throw InputError(kEnvironment, world_var, "must be >= 1, got " + std::to_string(out.world_size));
  if (out.rank >= out.world_size)
    throw InputError(kEnvironment, rank_var,
                     std::string(rank_var) + "=" + std::to_string(out.rank) + " must be below " +
                         world_var + "=" + std::to_string(out.world_size));
  if (out.local_rank > out.rank)
    throw InputError(kEnvironment, "LOCAL_RANK",
                     "local rank " + std::to_string(out.local_rank) +
                         " cannot exceed the global rank " + std::to_string(out.rank));
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::optional<RankEnv> ReadRankEnv(const EnvLookup& env) {
  RankEnv out;
  if (const auto rank = Get(env, "RANK")) {
    out.source = "torchrun";
    out.rank = ParseNonNegative("RANK", *rank);
    out.world_size =
        ParseNonNegative("WORLD_SIZE", Require(env, "WORLD_SIZE", "but RANK is"));
    const auto local = Get(env, "LOCAL_RANK");
    out.local_rank = local ? ParseNonNegative("LOCAL_RANK", *local) : out.rank;
    out.agent_store = Get(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    if (out.agent_store) {
      out.restart_count = ParseNonNegative(
          "TORCHELASTIC_RESTART_COUNT",
          Require(env, "TORCHELASTIC_RESTART_COUNT", "but TORCHELASTIC_USE_AGENT_STORE=True is"));
    }
    FinishAndCheck(env, "RANK", "WORLD_SIZE", out);
    return out;
  }
  const auto procid = Get(env, "SLURM_PROCID");
  if (procid && (Get(env, "MASTER_ADDR") || Get(env, "MASTER_PORT"))) {
    out.source = "slurm";
    out.rank = ParseNonNegative("SLURM_PROCID", *procid);
    out.world_size =
        ParseNonNegative("SLURM_NTASKS", Require(env, "SLURM_NTASKS", "but SLURM_PROCID is"));
    const auto local = Get(env, "SLURM_LOCALID");
    out.local_rank = local ? ParseNonNegative("SLURM_LOCALID", *local) : out.rank;
    FinishAndCheck(env, "SLURM_PROCID", "SLURM_NTASKS", out);
    return out;
  }
  return std::nullopt;
}

bool IsLoopbackAddress(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

}  // namespace meshplan
