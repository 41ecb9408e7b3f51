// Parameter counts: docs/cost_model.md section 1 test vectors and per-rank shards.
#include <catch2/catch.hpp>

#include "planner/cost/param_count.h"

namespace meshplan {
namespace {

ModelSpec Llama(int64_t E, int64_t H, int64_t L, int64_t F, bool tied) {
  ModelSpec m;
  m.vocab_size = 50257;
  m.hidden = E;
  m.heads = H;
  m.kv_heads = H;
  m.layers = L;
  m.ffn_hidden = F;
  m.tied_embeddings = tied;
  return m;
}

TEST_CASE("parameter counts match docs/cost_model.md section 1", "[planner][params]") {
  CHECK(CountParams(Llama(1024, 8, 16, 1536, true)) == 194'103'296);
  CHECK(CountParams(Llama(1024, 8, 16, 1536, false)) == 245'566'464);
  CHECK(CountParams(Llama(4096, 32, 48, 6144, false)) == 7'257'206'784);
}

TEST_CASE("GPT block is 12E^2 + 13E", "[planner][params]") {
  ModelSpec m = Llama(1024, 16, 1, 4096, false);
  m.block = BlockKind::kGpt;
  CHECK(BlockParams(m) == 12 * 1024 * 1024 + 13 * 1024);
}

TEST_CASE("stage shards add up to the whole model", "[planner][params]") {
  const ModelSpec m = Llama(1024, 8, 16, 1536, false);
  ParallelPlan plan;
  plan.pp = 4;
  int64_t sum = 0;
  for (int64_t s = 0; s < plan.pp; ++s) sum += CountStageParams(m, plan, s).total();
  CHECK(sum == CountParams(m));
  plan.tp = 2;
  plan.pp = 1;
  // The vocabulary is padded to a multiple of tp before it is split.
  CHECK(PaddedVocab(m, 2) == 50258);
  CHECK(CountStageParams(m, plan, 0).embedding == 50258 / 2 * 1024);
}

}  // namespace
}  // namespace meshplan
