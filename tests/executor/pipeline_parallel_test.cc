// Pipeline parallelism: the chunk-boundary message order (every schedule, several
// (pp, v, m), over an in-memory network whose payloads name the message), and whole
// training steps with gpipe, 1f1b, interleaved and zb_h1 on 2 and 4 stages (threads, Gloo)
// and dp=2 x pp=2 with ZeRO, against the single-process run of the same global batch.
#include "tests/executor/rank_threads.h"  // first: LibTorch before Catch2

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "executor/data.h"
#include "executor/parallel/pipeline_p2p.h"
#include "executor/run_rank.h"
#include "executor/trainer.h"
#include "planner/names.h"
#include "planner/pipeline_schedule.h"
#include "planner/stage_layers.h"
#include "tests/executor/test_training.h"
#include "tests/executor/test_util.h"

namespace meshplan {
namespace {

// ---------------------------------------------------------------------------------------
// An in-memory network: one FIFO per ordered pair of ranks, so a recv gets the oldest
// message its sender sent on that pair (the matching rule of NCCL and of one-tag Gloo).

class Network {
 public:
  explicit Network(int n) : queues_(static_cast<size_t>(n * n)), n_(n) {}
  void Push(int src, int dst, at::Tensor t) {
    std::lock_guard<std::mutex> lock(mu_);
    queues_[static_cast<size_t>(src * n_ + dst)].push_back(std::move(t));
    cv_.notify_all();
  }
  at::Tensor Pop(int src, int dst) {
    std::unique_lock<std::mutex> lock(mu_);
    auto& q = queues_[static_cast<size_t>(src * n_ + dst)];
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !q.empty(); }))
      throw std::runtime_error("recv from " + std::to_string(src) + " on rank " +
                               std::to_string(dst) + " timed out (deadlock)");
    at::Tensor t = std::move(q.front());
    q.pop_front();
    return t;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<at::Tensor>> queues_;
  int n_;
};

class DoneHandle final : public CommHandle {
 public:
  void Wait() override {}
  bool Test() override { return true; }
};

class RecvHandle final : public CommHandle {
 public:
  RecvHandle(Network& net, int src, int dst, torch::Tensor buffer)
      : net_(net), src_(src), dst_(dst), buffer_(std::move(buffer)) {}
  void Wait() override { buffer_.copy_(net_.Pop(src_, dst_)); }

 private:
  Network& net_;
  int src_, dst_;
  torch::Tensor buffer_;
};

class NetworkComm final : public Communicator {
 public:
  NetworkComm(Network& net, int rank, int size) : net_(net), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<CommHandle> AllReduceSumAsync(torch::Tensor&) override { return Unused(); }
  std::unique_ptr<CommHandle> ReduceScatterSumAsync(const torch::Tensor&, torch::Tensor&) override {
    return Unused();
  }
  std::unique_ptr<CommHandle> AllGatherAsync(const torch::Tensor&, torch::Tensor&) override {
    return Unused();
  }
  std::unique_ptr<CommHandle> BroadcastAsync(torch::Tensor&, int) override { return Unused(); }
  std::unique_ptr<CommHandle> SendAsync(const torch::Tensor& buffer, int dst) override {
    net_.Push(rank_, dst, buffer.clone());
    return std::make_unique<DoneHandle>();
  }
  std::unique_ptr<CommHandle> RecvAsync(torch::Tensor& buffer, int src) override {
    return std::make_unique<RecvHandle>(net_, src, rank_, buffer);
  }
  void Barrier() override { Unused(); }

 private:
  static std::unique_ptr<CommHandle> Unused() {
    throw std::logic_error("not part of the pipeline exchange");
  }
  Network& net_;
  int rank_, size_;
};

// The payload of a message names it, so a receiver can check it got the one it asked for.
double Code(PipelineTensor kind, int64_t microbatch, int64_t stage) {
  return (kind == PipelineTensor::kActivation ? 0 : 100000) + microbatch * 100 + stage;
}

// Runs one step of the schedule's exchange on every rank (no model): each forward of a
// stage that is not first receives the activation, each that is not last sends one; the
// backwards likewise with gradients. Checks every received payload and the recv order.
void ExchangeOnce(PipelineSchedule schedule, int64_t pp, int64_t v, int64_t m) {
  Network net(static_cast<int>(pp));
  test::OnThreads(static_cast<int>(pp), [&](int rank) {
    NetworkComm comm(net, rank, static_cast<int>(pp));
    PipelineChannels channels(comm, schedule, v, m, {2, 3}, at::TensorOptions().dtype(at::kFloat));
    const int64_t last = pp * v - 1;
    auto check = [&](const at::Tensor& got, PipelineTensor kind, int64_t mb, int64_t stage) {
      const double want = Code(kind, mb, stage);
      test::Expect(got.eq(want).all().item<bool>(),
                   "rank " + std::to_string(rank) + " wanted message " + std::to_string(want) +
                       ", got " + std::to_string(got.flatten()[0].item<double>()));
    };
    for (const ScheduleItem& item : StageOrder(schedule, pp, v, m, rank)) {
      channels.Reap();
      const int64_t s = item.chunk * pp + rank;
      if (item.pass == PipelinePass::kForward) {
        if (s > 0) check(channels.Receive(PipelineTensor::kActivation, item.microbatch, s),
                         PipelineTensor::kActivation, item.microbatch, s);
        if (s < last)
          channels.Send(PipelineTensor::kActivation, item.microbatch, s + 1,
                        at::full({2, 3}, Code(PipelineTensor::kActivation, item.microbatch, s + 1)));
      } else if (item.pass == PipelinePass::kBackward) {
        if (s < last) check(channels.Receive(PipelineTensor::kGradient, item.microbatch, s),
                            PipelineTensor::kGradient, item.microbatch, s);
        if (s > 0)
          channels.Send(PipelineTensor::kGradient, item.microbatch, s - 1,
                        at::full({2, 3}, Code(PipelineTensor::kGradient, item.microbatch, s - 1)));
      }
    }
    channels.FinishStep();
    // Per channel, the recvs were posted in exactly the sender's issue order.
    for (int64_t src = 0; src < pp; ++src) {
      std::vector<PipelineMessage> sent, received;
      for (const PipelineMessage& msg : SentMessages(schedule, pp, v, m, src))
        if (msg.dst == rank) sent.push_back(msg);
      for (const PipelineMessage& msg : channels.receive_log())
        if (msg.src == src) received.push_back(msg);
      test::Expect(sent == received, "rank " + std::to_string(rank) + ": recv order from rank " +
                                         std::to_string(src) + " differs from its send order");
    }
  });
}

TEST_CASE("pipeline: every channel's recvs are posted in its sender's order, no deadlock",
          "[executor][pp]") {
  struct Case {
    PipelineSchedule schedule;
    int64_t pp, v, m;
  };
  const std::vector<Case> cases = {
      {PipelineSchedule::kGpipe, 2, 1, 1},        {PipelineSchedule::kGpipe, 4, 1, 5},
      {PipelineSchedule::k1F1B, 2, 1, 4},         {PipelineSchedule::k1F1B, 4, 1, 3},
      {PipelineSchedule::k1F1B, 4, 1, 8},         {PipelineSchedule::k1F1B, 3, 1, 7},
      {PipelineSchedule::kInterleaved, 2, 2, 2},  {PipelineSchedule::kInterleaved, 2, 2, 6},
      {PipelineSchedule::kInterleaved, 4, 2, 4},  {PipelineSchedule::kInterleaved, 4, 2, 8},
      {PipelineSchedule::kInterleaved, 2, 3, 4},  {PipelineSchedule::kInterleaved, 4, 3, 12},
      {PipelineSchedule::kZeroBubbleH1, 2, 1, 3}, {PipelineSchedule::kZeroBubbleH1, 4, 1, 8},
  };
  for (const Case& c : cases) {
    INFO(ToString(c.schedule) << " pp=" << c.pp << " v=" << c.v << " m=" << c.m);
    ExchangeOnce(c.schedule, c.pp, c.v, c.m);
  }
}

TEST_CASE("pipeline: a message wanted before an earlier one of its channel waits in the stash",
          "[executor][pp]") {
  // gpipe, pp=2, m=2: rank 0 sends activations 0, 1; rank 1 sends gradients 0, 1. Each
  // receiver asks for micro-batch 1 first: micro-batch 0 must be received first (the
  // channel's order) and handed out from the stash afterwards.
  Network net(2);
  test::OnThreads(2, [&](int rank) {
    NetworkComm comm(net, rank, 2);
    PipelineChannels channels(comm, PipelineSchedule::kGpipe, 1, 2, {2, 3},
                              at::TensorOptions().dtype(at::kFloat));
    const auto kind = rank == 0 ? PipelineTensor::kGradient : PipelineTensor::kActivation;
    const auto out = rank == 0 ? PipelineTensor::kActivation : PipelineTensor::kGradient;
    const int64_t other = 1 - rank;
    for (int64_t mb = 0; mb < 2; ++mb)
      channels.Send(out, mb, other, at::full({2, 3}, Code(out, mb, other)));
    for (int64_t mb : {1, 0}) {
      const at::Tensor got = channels.Receive(kind, mb, rank);
      test::Expect(got.eq(Code(kind, mb, rank)).all().item<bool>(),
                   "rank " + std::to_string(rank) + ": wrong payload for micro-batch " +
                       std::to_string(mb));
    }
    channels.FinishStep();
    test::Expect(channels.receive_log().size() == 2 && channels.receive_log()[0].microbatch == 0,
                 "rank " + std::to_string(rank) + ": recvs not posted in the sender's order");
  });
}

TEST_CASE("pipeline: a Gloo send's handle reports completion through Test()", "[executor][pp]") {
  ParallelPlan plan;
  plan.pp = 2;
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    Communicator& pp = mesh.comm(MeshDim::kPp);
    at::Tensor t = at::full({4}, pp.rank() == 0 ? 7.0 : 0.0);
    if (pp.rank() == 0) {
      const auto handle = pp.SendAsync(t, 1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!handle->Test()) {
        test::Expect(std::chrono::steady_clock::now() < deadline, "send never tested complete");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      handle->Wait();  // returns at once
    } else {
      pp.Recv(t, 0);
      test::Expect(t.eq(7.0).all().item<bool>(), "wrong payload");
    }
  });
}

TEST_CASE("pipeline: a rank's chunks are virtual stages c*pp + r", "[executor][pp]") {
  ModelSpec m = test::TinySpec(false, 2);
  m.layers = 8;
  ParallelPlan plan;
  plan.pp = 2;
  plan.schedule = PipelineSchedule::kInterleaved;
  plan.virtual_stages = 2;
  const ParamLayout layout =
      BuildParamLayout(m, 1, PipelineRankChunks(m, SplitLayers(m.layers, plan), 2, 1));
  REQUIRE(layout.chunks.size() == 2);
  CHECK(layout.chunks[0].first_block == 2);  // virtual stage 1: blocks 2, 3
  CHECK(layout.chunks[1].first_block == 6);  // virtual stage 3: blocks 6, 7 and the head
  CHECK(layout.chunks[1].num_blocks == 2);
  CHECK(layout.embedding_group == -1);
  CHECK(layout.chunks[1].head_group == layout.head_group);
  CHECK(layout.groups[static_cast<size_t>(layout.head_group)].name == "head");
  CHECK_THROWS(PipelineRankChunks(m, SplitLayers(m.layers, plan), 1, 0));  // the split has 2 chunks
  plan.pp = 3;
  plan.schedule = PipelineSchedule::k1F1B;
  plan.virtual_stages = 1;
  CHECK_THROWS(PipelineRankChunks(m, SplitLayers(m.layers, plan), 1, 0));  // 8 do not split 3 ways
}

TEST_CASE("pipeline: uneven stages hold their own blocks (first_stage_layers, last_stage_layers)",
          "[executor][pp]") {
  ModelSpec m = test::TinySpec(false, 2);
  m.layers = 8;
  ParallelPlan plan = ParsePlanString("pp=3,first_stage_layers=1,last_stage_layers=3");
  const StageLayers stages = SplitLayers(m.layers, plan);  // 1 + 4 + 3
  const std::vector<StageRange> first = PipelineRankChunks(m, stages, 1, 0);
  const std::vector<StageRange> middle = PipelineRankChunks(m, stages, 1, 1);
  const std::vector<StageRange> last = PipelineRankChunks(m, stages, 1, 2);
  REQUIRE((first.size() == 1 && middle.size() == 1 && last.size() == 1));
  CHECK((first[0].first_block == 0 && first[0].end_block == 1 && first[0].embedding &&
         !first[0].head));
  CHECK((middle[0].first_block == 1 && middle[0].end_block == 5 && !middle[0].embedding &&
         !middle[0].head));
  CHECK((last[0].first_block == 5 && last[0].end_block == 8 && last[0].head));
  plan.first_stage_layers = plan.last_stage_layers = 4;  // no layer left for the middle stage
  CHECK_THROWS(PipelineRankChunks(m, SplitLayers(m.layers, plan), 1, 0));
}

TEST_CASE("pipeline: interleaved uneven stages give up the blocks of the model's end chunks",
          "[executor][pp]") {
  ModelSpec m = test::TinySpec(false, 2);
  m.layers = 8;
  // 1 + 2 + 2 + 3 on pp=4 in chunks of 1: virtual stages 0..7 hold [], [0], [1], [2], [3],
  // [4], [5], [6, 7].
  ParallelPlan plan = ParsePlanString("pp=4,schedule=interleaved,vpp=2,first_stage_layers=1,"
                                      "last_stage_layers=3");
  const StageLayers stages = SplitLayers(m.layers, plan);
  const std::vector<StageRange> first = PipelineRankChunks(m, stages, 2, 0);
  REQUIRE(first.size() == 2);
  CHECK((first[0].first_block == 0 && first[0].end_block == 0 && first[0].embedding &&
         !first[0].head));
  CHECK((first[1].first_block == 3 && first[1].end_block == 4 && !first[1].embedding));
  const std::vector<StageRange> last = PipelineRankChunks(m, stages, 2, 3);
  CHECK((last[0].first_block == 2 && last[0].end_block == 3 && !last[0].head));
  CHECK((last[1].first_block == 6 && last[1].end_block == 8 && last[1].head));
  const ParamLayout layout = BuildParamLayout(m, 1, first);
  REQUIRE(layout.chunks.size() == 2);
  CHECK(layout.chunks[0].num_blocks == 0);
  CHECK(layout.chunks[1].num_blocks == 1);
  CHECK(layout.embedding_group >= 0);
  // A split whose chunks do not tile the layers is refused.
  plan.first_stage_layers = 0;  // 8 - 3 = 5 over 3 stages: not whole
  CHECK_THROWS(PipelineRankChunks(m, SplitLayers(m.layers, plan), 2, 0));
}

// ---------------------------------------------------------------------------------------
// Training against the single process

using test::Trained;

TrainingSpec Training(int64_t global_batch) { return test::TinyTraining(global_batch, 8); }

Trained Train(const ModelSpec& m, const TrainingSpec& training, const DeviceMesh& mesh) {
  return test::TrainSteps(m, training, mesh);
}

struct PpCase {
  int64_t dp, pp, v;
  PipelineSchedule schedule;
  int64_t microbatches;  // per dp rank
  Recompute recompute;
  int zero;
  int64_t first_stage_layers = 0;  // uneven stages (0: even)
  int64_t last_stage_layers = 0;
};

std::string Describe(const PpCase& c) {
  return "dp=" + std::to_string(c.dp) + " pp=" + std::to_string(c.pp) + " " +
         ToString(c.schedule) + " v=" + std::to_string(c.v) + " m=" +
         std::to_string(c.microbatches) + " zero=" + std::to_string(c.zero) +
         (c.recompute == Recompute::kFull ? " full" : " none") + " first=" +
         std::to_string(c.first_stage_layers) + " last=" + std::to_string(c.last_stage_layers);
}

TEST_CASE("pipeline parallel training equals the single-process run", "[executor][pp]") {
  using S = PipelineSchedule;
  const PpCase c = GENERATE(
      PpCase{1, 2, 1, S::kGpipe, 3, Recompute::kNone, 0},
      PpCase{1, 2, 1, S::k1F1B, 4, Recompute::kFull, 0},
      PpCase{1, 2, 2, S::kInterleaved, 4, Recompute::kNone, 0},
      PpCase{1, 2, 1, S::kZeroBubbleH1, 3, Recompute::kFull, 0},
      PpCase{1, 4, 1, S::kGpipe, 4, Recompute::kFull, 0},
      PpCase{1, 4, 1, S::k1F1B, 6, Recompute::kNone, 0},
      PpCase{1, 4, 2, S::kInterleaved, 4, Recompute::kFull, 0},
      PpCase{1, 4, 2, S::kInterleaved, 8, Recompute::kNone, 0},
      PpCase{2, 2, 1, S::k1F1B, 3, Recompute::kNone, 1},
      PpCase{2, 2, 2, S::kInterleaved, 2, Recompute::kFull, 1},
      PpCase{2, 2, 1, S::k1F1B, 3, Recompute::kFull, 3},
      PpCase{2, 2, 2, S::kInterleaved, 4, Recompute::kNone, 3},
      PpCase{2, 2, 1, S::kGpipe, 2, Recompute::kNone, 2},
      // Uneven stages: 3 + 5 on pp=2, 1 + 4 + 3 on pp=3, and 2 + 3 + 3 (last left even).
      PpCase{1, 2, 1, S::k1F1B, 3, Recompute::kNone, 0, 3, 5},
      PpCase{1, 3, 1, S::k1F1B, 4, Recompute::kFull, 0, 1, 3},
      PpCase{2, 3, 1, S::kGpipe, 2, Recompute::kNone, 1, 2, 0},
      // Interleaved on uneven stages: 6 + 2 in chunks of 1 (stage 0's first chunk holds 5),
      // and 1 + 2 + 2 + 3 in chunks of 1 (stage 0's first chunk holds only the embedding).
      PpCase{1, 2, 2, S::kInterleaved, 4, Recompute::kNone, 0, 6, 0},
      PpCase{2, 2, 2, S::kInterleaved, 2, Recompute::kFull, 1, 6, 0},
      PpCase{1, 4, 2, S::kInterleaved, 4, Recompute::kFull, 0, 1, 3},
      PpCase{1, 4, 2, S::kInterleaved, 8, Recompute::kNone, 0, 1, 3});
  INFO(Describe(c));
  ModelSpec m = test::TinySpec(false, 2);
  m.layers = 8;
  const TrainingSpec training = Training(c.dp * c.microbatches);  // micro-batch 1
  ParallelPlan plan;
  plan.dp = c.dp;
  plan.pp = c.pp;
  plan.zero_stage = c.zero;
  plan.recompute = c.recompute;
  plan.schedule = c.schedule;
  plan.virtual_stages = c.v;
  plan.first_stage_layers = c.first_stage_layers;
  plan.last_stage_layers = c.last_stage_layers;

  ParallelPlan single;
  single.recompute = c.recompute;
  const DeviceMesh one(single, 0, nullptr);
  const Trained want = Train(m, training, one);
  const std::map<std::string, at::Tensor> want_params = test::ParamsByName(want);

  std::vector<Trained> got(static_cast<size_t>(plan.world_size()));
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    got[static_cast<size_t>(mesh.world_rank())] = Train(m, training, mesh);
  });
  const double step_tol = 1e-3 * training.learning_rate;
  std::map<std::string, int> holders;
  for (size_t r = 0; r < got.size(); ++r) {
    INFO("rank " << r);
    REQUIRE(got[r].losses.size() == want.losses.size());
    for (size_t s = 0; s < want.losses.size(); ++s)
      CHECK(got[r].losses[s] == Approx(want.losses[s]).epsilon(1e-5).margin(1e-5));
    for (const auto& [name, tensor] : test::ParamsByName(got[r])) {
      REQUIRE(want_params.count(name) == 1);
      test::RequireClose(tensor, want_params.at(name), 1e-5, step_tol,
                         Describe(c) + ", rank " + std::to_string(r) + ", " + name);
      ++holders[name];
    }
  }
  // Every group of the model is trained by exactly dp ranks (one stage of each pipeline).
  for (const auto& [name, tensor] : want_params) {
    INFO(name);
    CHECK(holders[name] == c.dp);
  }
}

TEST_CASE("meshplan run takes pp > 1 plans, refusing tied embeddings and zb_h1 with a reason",
          "[executor][pp]") {
  PlanFile pf;
  pf.model = test::TinySpec(false, 2);
  pf.model.layers = 4;
  pf.training = Training(4);
  pf.plan.pp = 2;
  CHECK(ExecutorLimitations(pf).empty());
  pf.model.tied_embeddings = true;
  const std::vector<std::string> reasons = ExecutorLimitations(pf);
  REQUIRE(reasons.size() == 1);
  CHECK(reasons[0].find("tied") != std::string::npos);
  CHECK(reasons[0].find("untied") != std::string::npos);
  // ZB-H1's split weight-gradient pass is not in the executor: refused, not run as 1F1B.
  pf.model.tied_embeddings = false;
  pf.plan.schedule = PipelineSchedule::kZeroBubbleH1;
  const std::vector<std::string> zb = ExecutorLimitations(pf);
  REQUIRE(zb.size() == 1);
  CHECK(zb[0].find("zb_h1") != std::string::npos);
  CHECK(reasons[0].find("pp=1") != std::string::npos);
}

TEST_CASE("pipeline parallel refuses tied embeddings", "[executor][pp]") {
  ModelSpec m = test::TinySpec(true, 2);
  m.layers = 4;
  ParallelPlan plan;
  plan.pp = 2;
  std::vector<std::string> errors(2);
  test::OnMesh(plan, [&](const DeviceMesh& mesh) {
    const auto data = MakeSyntheticTokens(5, m.vocab_size, 8);
    try {
      Trainer trainer(m, Training(2), mesh, *data, 42, nullptr);
    } catch (const std::invalid_argument& e) {
      errors[static_cast<size_t>(mesh.world_rank())] = e.what();
    }
  });
  for (const std::string& e : errors) CHECK(e.find("untied") != std::string::npos);
}

}  // namespace
}  // namespace meshplan
