// ReadRankEnv: torchrun and Slurm variables, and the errors for inconsistent ones.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "executor/launch/rank_env.h"
#include "planner/input_error.h"

namespace meshplan {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("rank env: torchrun variables", "[executor][rank_env]") {
  const auto env = ReadRankEnv(Env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                    {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}}));
  REQUIRE(env.has_value());
  CHECK(env->rank == 3);
  CHECK(env->world_size == 4);
  CHECK(env->local_rank == 1);
  CHECK(env->master_addr == "node0");
  CHECK(env->master_port == 29500);
  CHECK_FALSE(env->agent_store);
  CHECK(env->source == "torchrun");
}

TEST_CASE("rank env: torchrun's agent store", "[executor][rank_env]") {
  const auto env = ReadRankEnv(Env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                    {"MASTER_PORT", "1234"},
                                    {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                    {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  REQUIRE(env.has_value());
  CHECK(env->agent_store);
  CHECK(env->restart_count == 2);
  CHECK(env->local_rank == 0);
}

TEST_CASE("rank env: Slurm variables, RANK wins, and a plain shell is no rank",
          "[executor][rank_env]") {
  const auto slurm = ReadRankEnv(Env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"},
                                      {"SLURM_LOCALID", "1"}, {"MASTER_ADDR", "n1"},
                                      {"MASTER_PORT", "6000"}}));
  REQUIRE(slurm.has_value());
  CHECK(slurm->rank == 5);
  CHECK(slurm->world_size == 8);
  CHECK(slurm->local_rank == 1);
  CHECK(slurm->source == "slurm");

  const auto both = ReadRankEnv(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "1"}, {"MASTER_ADDR", "a"},
                                     {"MASTER_PORT", "1"}}));
  REQUIRE(both.has_value());
  CHECK(both->rank == 1);

  // An salloc shell (Slurm variables, no MASTER_*) and an ordinary shell stay launchers.
  CHECK_FALSE(ReadRankEnv(Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).has_value());
  CHECK_FALSE(ReadRankEnv(Env({})).has_value());
}

TEST_CASE("rank env: inconsistent variables name the variable", "[executor][rank_env]") {
  const std::map<std::string, std::string> good = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& key, const char* value) {
    auto vars = good;
    if (value == nullptr) vars.erase(key);
    else vars[key] = value;
    return Env(vars);
  };
  CHECK_THROWS_WITH(ReadRankEnv(with("RANK", "2")),
                    Catch::Contains("RANK=2 must be below WORLD_SIZE=2"));
  CHECK_THROWS_WITH(ReadRankEnv(with("MASTER_PORT", nullptr)),
                    Catch::Contains("MASTER_PORT") && Catch::Contains("not set"));
  CHECK_THROWS_WITH(ReadRankEnv(with("MASTER_ADDR", nullptr)), Catch::Contains("MASTER_ADDR"));
  CHECK_THROWS_WITH(ReadRankEnv(with("WORLD_SIZE", nullptr)), Catch::Contains("WORLD_SIZE"));
  CHECK_THROWS_WITH(ReadRankEnv(with("WORLD_SIZE", "0")), Catch::Contains("WORLD_SIZE"));
  CHECK_THROWS_WITH(ReadRankEnv(with("RANK", "one")),
                    Catch::Contains("RANK") && Catch::Contains("integer"));
  CHECK_THROWS_WITH(ReadRankEnv(with("MASTER_PORT", "70000")), Catch::Contains("1..65535"));
  CHECK_THROWS_WITH(ReadRankEnv(with("LOCAL_RANK", "-1")), Catch::Contains("LOCAL_RANK"));
  CHECK_THROWS_AS(ReadRankEnv(with("RANK", "5")), InputError);
  CHECK_THROWS_WITH(
      ReadRankEnv(Env({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"MASTER_ADDR", "n"},
                       {"MASTER_PORT", "1"}})),
      Catch::Contains("SLURM_PROCID=4 must be below SLURM_NTASKS=4"));
  CHECK_THROWS_WITH(ReadRankEnv(Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                     {"MASTER_ADDR", "n"}})),
                    Catch::Contains("MASTER_PORT"));
}

}  // namespace
}  // namespace meshplan
