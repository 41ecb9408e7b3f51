// ZeRO-3 parameter prefetch (executor/parallel/zero_engine.h PrefetchParams): the all-gather of a
// prefetched group is issued before its LeaseParams, which then gathers nothing, also
// with gradient reduce-scatters in flight on the same communicator; and the trainer
// prefetches the plan's `prefetch` groups ahead (1, 2, 4), which changes neither losses nor
// parameters (bitwise) nor the number of all-gathers, against the same run at prefetch=0.
// The memory each depth holds: tests/executor/memory_prediction_test.cc.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <memory>
#include <string>
#include <vector>

#include "executor/comm/gloo_communicator.h"
#include "executor/data.h"
#include "executor/model/param_layout.h"
#include "executor/parallel/zero_engine.h"
#include "executor/trainer.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

using test::Expect;
using test::TinySpec;

// Forwards every call to `inner` and appends the collective's name to `log` as it is
// issued (waits are not logged).
class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(std::unique_ptr<Communicator> inner, std::vector<std::string>* log)
      : inner_(std::move(inner)), log_(log) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor& buffer) override {
    Log("all_reduce");
    return inner_->AllReduceSumAsync(buffer);
  }
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor& input,
                                                    torch::Tensor& output) override {
    Log("reduce_scatter");
    return inner_->ReduceScatterSumAsync(input, output);
  }
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor& input,
                                             torch::Tensor& output) override {
    Log("all_gather");
    return inner_->AllGatherAsync(input, output);
  }
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor& buffer, int root) override {
    Log("broadcast");
    return inner_->BroadcastAsync(buffer, root);
  }
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override {
    Log("send");
    return inner_->SendAsync(buffer, dst);
  }
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override {
    Log("recv");
    return inner_->RecvAsync(buffer, src);
  }
  void Barrier() override {
    Log("barrier");
    inner_->Barrier();
  }

 private:
  void Log(const char* what) {
    if (log_ != nullptr) log_->push_back(what);
  }
  std::unique_ptr<Communicator> inner_;
  std::vector<std::string>* log_;
};

int64_t Count(const std::vector<std::string>& log, const std::string& what) {
  int64_t n = 0;
  for (const std::string& s : log) n += s == what;
  return n;
}

// One backward-like pass over the blocks of a 2-rank ZeRO-3 engine, last block first,
// each block's gradient reduce-scattered async as in the trainer; with `prefetch` each
// block prefetches the one before it. Returns the updated full params of every group.
std::vector<at::Tensor> BackwardPass(ZeroEngine& engine, bool prefetch, int rank,
                                     std::vector<std::string>& log) {
  const ParamLayout& layout = engine.layout();
  const ChunkGroups& chunk = layout.chunks.front();
  engine.set_prefetch_depth(prefetch ? 1 : 0);
  engine.BeginStep(1);
  for (int64_t i = chunk.num_blocks - 1; i >= 0; --i) {
    const int g = chunk.first_block_group + static_cast<int>(i);
    const int64_t gathers_before = Count(log, "all_gather");
    const bool was_in_flight = engine.ParamsInFlight(g);
    {
      const ParamsLease lease = engine.LeaseParams(g);
      const at::Tensor& params = lease.params();
      // Prefetched: the all-gather was issued earlier and Acquire issues none.
      Expect(Count(log, "all_gather") == gathers_before + (was_in_flight ? 0 : 1),
             "acquire of a prefetched group gathers again");
      Expect(!engine.ParamsInFlight(g), "acquired group still in flight");
      if (prefetch && i > 0) {
        engine.PrefetchParams(g - 1);
        Expect(engine.ParamsInFlight(g - 1), "prefetch launched nothing");
        Expect(log.back() == "all_gather", "prefetch is not an all-gather");
      }
      // A gradient that depends on the gathered params and the rank.
      engine.GradBuffer(g).copy_(params * 0.5 + double(rank + 1));
    }
    engine.GradReady(g);
    if (prefetch && i > 0) Expect(log.back() == "reduce_scatter", "order of collectives");
  }
  // The embedding and the head get their contributions too (no params needed).
  engine.GradBuffer(layout.embedding_group).fill_(1.0 + rank);
  engine.GradReady(layout.embedding_group);
  engine.GradBuffer(chunk.head_group).fill_(2.0 - rank);
  engine.GradReady(chunk.head_group);
  engine.EndBackward();
  engine.Step();
  std::vector<at::Tensor> params;
  for (size_t g = 0; g < layout.groups.size(); ++g)
    params.push_back(engine.FullParamsCopy(static_cast<int>(g)));
  return params;
}

TEST_CASE("ZeRO-3 prefetch issues a group's all-gather before its acquire, same update",
          "[executor][zero_prefetch]") {
  ModelSpec m = TinySpec(false, 2);
  m.layers = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::seconds(60));
  GlooOptions options;
  options.timeout = std::chrono::seconds(60);
  std::vector<std::vector<at::Tensor>> with(2), without(2);
  std::vector<int64_t> prefetched(2);
  test::OnThreads(2, [&](int r) {
    std::vector<std::string> log;
    RecordingCommunicator dp(
        std::make_unique<GlooCommunicator>(store, r, std::vector<int>{0, 1}, "dp", options), &log);
    const ParamLayout layout = BuildParamLayout(m, 2);
    AdamWOptions adamw;
    adamw.lr = 1e-2;
    ZeroEngine on(layout, 3, dp, adamw, 7);
    with[r] = BackwardPass(on, true, r, log);
    prefetched[r] = on.prefetched_acquires();
    ZeroEngine off(layout, 3, dp, adamw, 7);
    without[r] = BackwardPass(off, false, r, log);
    Expect(off.prefetched_acquires() == 0, "prefetch while off");
    // A prefetch of a gathered group, or on a stage other than 3, launches nothing.
    const int64_t gathers = Count(log, "all_gather");
    const int b = layout.chunks.front().first_block_group;
    {
      const ParamsLease held = on.LeaseParams(b);
      Expect(Count(log, "all_gather") == gathers + 1, "blocking acquire");
      on.PrefetchParams(b);
      Expect(!on.ParamsInFlight(b) && Count(log, "all_gather") == gathers + 1,
             "prefetch of held group");
    }
    ZeroEngine stage2(layout, 2, dp, adamw, 7);
    stage2.PrefetchParams(b);
    Expect(!stage2.ParamsInFlight(b) && Count(log, "all_gather") == gathers + 1, "stage 2 prefetch");
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(prefetched[r] == m.layers - 1);  // every block but the last one acquired
    REQUIRE(with[r].size() == without[r].size());
    for (size_t g = 0; g < with[r].size(); ++g) {
      INFO("rank " << r << " group " << g);
      CHECK(at::equal(with[r][g], without[r][g]));
    }
  }
  for (size_t g = 0; g < with[0].size(); ++g) CHECK(at::equal(with[0][g], with[1][g]));
}

struct Run {
  std::vector<double> losses;
  std::vector<at::Tensor> params;
  int64_t prefetched = 0;
  int64_t gathers = 0;
};

TEST_CASE("the trainer prefetches the plan's depth, leaving losses, params and gathers unchanged",
          "[executor][zero_prefetch]") {
  const bool tied = GENERATE(false, true);
  const ModelSpec m = TinySpec(tied, 2);
  TrainingSpec training;
  training.global_batch = 8;
  training.seq_len = 8;
  training.precision = Precision::kFp32;
  training.learning_rate = 1e-2;
  const int steps = 2;
  const auto data = MakeSyntheticTokens(5, m.vocab_size, training.seq_len);
  auto train = [&](int64_t depth) {
    ParallelPlan plan;
    plan.dp = 2;
    plan.zero_stage = 3;
    plan.micro_batch = 2;  // 2 micro-batches per rank
    plan.zero3_prefetch = depth;
    std::vector<Run> runs(2);
    auto store = c10::make_intrusive<c10d::HashStore>();
    store->setTimeout(std::chrono::seconds(60));
    GlooOptions options;
    options.timeout = std::chrono::seconds(60);
    test::OnThreads(2, [&](int r) {
      std::vector<std::string> dp_log;
      const GroupFactory gloo = GlooGroupFactory(store, r, options);
      const GroupFactory recording = [&](const std::string& name, const std::vector<int>& members) {
        return std::unique_ptr<Communicator>(std::make_unique<RecordingCommunicator>(
            gloo(name, members), name == "dp" ? &dp_log : nullptr));
      };
      const DeviceMesh mesh(plan, r, recording);
      Trainer trainer(m, training, mesh, *data, 42, nullptr);
      Expect(trainer.engine().prefetch_depth() == depth, "the trainer ignores the plan's prefetch");
      Run& run = runs[static_cast<size_t>(r)];
      for (int s = 0; s < steps; ++s) run.losses.push_back(trainer.Step().loss);
      run.gathers = Count(dp_log, "all_gather");
      run.prefetched = trainer.engine().prefetched_acquires();
      for (size_t g = 0; g < trainer.engine().layout().groups.size(); ++g)
        run.params.push_back(trainer.engine().FullParamsCopy(static_cast<int>(g)));
    });
    return runs;
  };
  const int64_t depth = GENERATE(1, 2, 4);
  const std::vector<Run> on = train(depth), off = train(0);
  // Per micro-batch: forward gathers embedding, 2 blocks, head (and a tied embedding
  // again at the head); backward the 2 blocks (the head is held since its forward).
  const int64_t per_mb = 6 + (tied ? 1 : 0);
  // Prefetched at any depth: forward block 0, block 1, head; backward block 1, block 0
  // (each pass's first group is acquired before anything could prefetch it).
  for (int r = 0; r < 2; ++r) {
    INFO((tied ? "tied" : "untied") << " rank " << r << " prefetch " << depth);
    CHECK(on[r].prefetched == steps * 2 * 5);
    CHECK(off[r].prefetched == 0);
    CHECK(on[r].gathers == steps * 2 * per_mb);
    CHECK(off[r].gathers == on[r].gathers);
    REQUIRE(on[r].losses.size() == off[r].losses.size());
    for (size_t s = 0; s < on[r].losses.size(); ++s) CHECK(on[r].losses[s] == off[r].losses[s]);
    for (size_t g = 0; g < on[r].params.size(); ++g) CHECK(at::equal(on[r].params[g], off[r].params[g]));
  }
}

}  // namespace
}  // namespace meshplan
