#include "simulator/event_sim.h"

#include <queue>
#include <stdexcept>
#include <string>

#include "simulator/network.h"

namespace meshplan {
namespace {

enum class EventType : uint8_t { kFinish, kLatencyDone };

struct Event {
  double t;
  int32_t op;
  int32_t version;
  EventType type;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.t != b.t) return a.t > b.t;
    if (a.op != b.op) return a.op > b.op;
    return a.type < b.type;  // kLatencyDone before kFinish of the same op
  }
};

class Engine {
 public:
  explicit Engine(const StepGraph& g) : g_(g) {}
  EventTrace Run();

 private:
  int StreamIndex(const SimOp& op) const {
    return op.rank * kNumSimStreams + static_cast<int>(op.stream);
  }
  int LinkIndex(const SimOp& op) const {
    return op.rank * kNumTiers + static_cast<int>(op.transfer.tier);
  }
  bool Ready(int32_t op) const { return pending_[op] == 0; }
  void TryStart(int stream, double t);
  void Start(int32_t op, int stream, double t);
  void EnterLink(int32_t op, double t);
  void Reschedule(int link);
  void Finish(int32_t op, double t);
  // Compute at a rate that falls while the rank's dp stream is busy.
  double ComputeRate(int32_t rank) const { return dp_busy_[rank] ? slow_rate_ : 1.0; }
  void StartCompute(int32_t op, double t);
  void SetDpBusy(int32_t rank, bool busy, double t);

  const StepGraph& g_;
  EventTrace out_;
  std::vector<int32_t> pending_;
  std::vector<int32_t> last_dep_;
  std::vector<int32_t> version_;
  std::vector<int32_t> succ_begin_, succ_;
  std::vector<int32_t> head_;      // per stream: next index into stream_ops
  std::vector<uint8_t> busy_;
  std::vector<int32_t> last_op_;   // per stream: the op that ran last
  std::vector<SharedLink> links_;
  double slow_rate_ = 1;              // compute rate beside dp communication
  std::vector<uint8_t> dp_busy_;      // per rank
  // Per rank (one compute stream each): the compute op running (or -1), its seconds of
  // compute at full rate still to run, and when its rate last changed.
  std::vector<int32_t> computing_;
  std::vector<double> work_left_;
  std::vector<double> rate_since_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  int64_t done_ = 0;
};

void Engine::TryStart(int stream, double t) {
  if (busy_[stream]) return;
  const int32_t h = head_[stream];
  if (h >= g_.stream_begin[stream + 1]) return;
  const int32_t op = g_.stream_ops[h];
  if (!Ready(op)) return;
  ++head_[stream];
  Start(op, stream, t);
}

void Engine::Start(int32_t op, int stream, double t) {
  const SimOp& o = g_.ops[op];
  busy_[stream] = 1;
  out_.start_s[op] = t;
  const int32_t dep = last_dep_[op], prev = last_op_[stream];
  if (dep >= 0 && (prev < 0 || out_.end_s[dep] >= out_.end_s[prev])) out_.enabler[op] = dep;
  else out_.enabler[op] = prev;
  if (o.stream == SimStream::kDp) SetDpBusy(o.rank, true, t);
  if (o.is_compute()) {
    StartCompute(op, t);
  } else if (o.transfer.latency_s > 0) {
    queue_.push({t + o.transfer.latency_s, op, 0, EventType::kLatencyDone});
  } else {
    EnterLink(op, t);
  }
}

void Engine::StartCompute(int32_t op, double t) {
  const int32_t rank = g_.ops[op].rank;
  computing_[rank] = op;
  work_left_[rank] = g_.ops[op].duration_s;
  rate_since_[rank] = t;
  queue_.push({t + work_left_[rank] / ComputeRate(rank), op, version_[op], EventType::kFinish});
}

void Engine::SetDpBusy(int32_t rank, bool busy, double t) {
  if (slow_rate_ == 1 || static_cast<bool>(dp_busy_[rank]) == busy) return;
  const int32_t op = computing_[rank];
  if (op >= 0) work_left_[rank] -= (t - rate_since_[rank]) * ComputeRate(rank);
  dp_busy_[rank] = busy;
  if (op < 0) return;
  rate_since_[rank] = t;
  ++version_[op];
  queue_.push({t + work_left_[rank] / ComputeRate(rank), op, version_[op], EventType::kFinish});
}

void Engine::EnterLink(int32_t op, double t) {
  const SimOp& o = g_.ops[op];
  SharedLink& link = links_[LinkIndex(o)];
  if (!(o.transfer.link_bytes > 0) || !(link.bandwidth_Bps() > 0)) {
    queue_.push({t, op, version_[op], EventType::kFinish});
    return;
  }
  link.Add(op, o.transfer.link_bytes, t);
  Reschedule(LinkIndex(o));
}

void Engine::Reschedule(int link_index) {
  const SharedLink& link = links_[link_index];
  link.ForEachFlow([&](int32_t flow) {
    ++version_[flow];
    queue_.push({link.FinishTime(flow), flow, version_[flow], EventType::kFinish});
  });
}

void Engine::Finish(int32_t op, double t) {
  const SimOp& o = g_.ops[op];
  if (!o.is_compute() && o.transfer.link_bytes > 0) {
    const int li = LinkIndex(o);
    if (links_[li].bandwidth_Bps() > 0) {
      links_[li].Remove(op, t);
      Reschedule(li);
    }
  }
  out_.end_s[op] = t;
  ++done_;
  if (o.is_compute()) computing_[o.rank] = -1;
  const int stream = StreamIndex(o);
  busy_[stream] = 0;
  last_op_[stream] = op;
  if (o.stream == SimStream::kDp) SetDpBusy(o.rank, false, t);
  for (int32_t i = succ_begin_[op]; i < succ_begin_[op + 1]; ++i) {
    const int32_t s = succ_[i];
    last_dep_[s] = op;
    if (--pending_[s] == 0) TryStart(StreamIndex(g_.ops[s]), t);
  }
  TryStart(stream, t);
}

EventTrace Engine::Run() {
  const size_t n = g_.ops.size();
  out_.start_s.assign(n, 0);
  out_.end_s.assign(n, 0);
  out_.enabler.assign(n, -1);
  pending_.resize(n);
  for (size_t i = 0; i < n; ++i) pending_[i] = g_.pred_begin[i + 1] - g_.pred_begin[i];
  last_dep_.assign(n, -1);
  version_.assign(n, 0);
  succ_begin_.assign(n + 1, 0);
  for (int32_t p : g_.preds) ++succ_begin_[p + 1];
  for (size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
  succ_.resize(g_.preds.size());
  {
    std::vector<int32_t> fill(succ_begin_.begin(), succ_begin_.end() - 1);
    for (size_t i = 0; i < n; ++i)
      for (int32_t k = g_.pred_begin[i]; k < g_.pred_begin[i + 1]; ++k)
        succ_[fill[g_.preds[k]]++] = static_cast<int32_t>(i);
  }
  const int streams = static_cast<int>(g_.ranks) * kNumSimStreams;
  head_.assign(g_.stream_begin.begin(), g_.stream_begin.end() - 1);
  busy_.assign(streams, 0);
  last_op_.assign(streams, -1);
  links_.clear();
  slow_rate_ = 1 / (1 + g_.dp_comm_slowdown);
  dp_busy_.assign(g_.ranks, 0);
  computing_.assign(g_.ranks, -1);
  work_left_.assign(g_.ranks, 0);
  rate_since_.assign(g_.ranks, 0);
  for (double bw : g_.link_bandwidth_Bps) links_.emplace_back(bw);
  std::vector<Event> storage;
  storage.reserve(n + 16);
  queue_ = decltype(queue_)(Later{}, std::move(storage));

  for (int s = 0; s < streams; ++s) TryStart(s, 0);
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    ++out_.events;
    if (e.type == EventType::kLatencyDone) {
      EnterLink(e.op, e.t);
      continue;
    }
    if (e.version != version_[e.op]) continue;  // rescheduled since
    Finish(e.op, e.t);
  }
  if (done_ != static_cast<int64_t>(n)) {
    int32_t first = -1;
    for (size_t i = 0; i < n && first < 0; ++i)
      if (pending_[i] > 0) first = static_cast<int32_t>(i);
    const SimOp* o = first >= 0 ? &g_.ops[first] : nullptr;
    throw std::logic_error(
        "step simulation stalled: " + std::to_string(n - done_) + " of " + std::to_string(n) +
        " ops never ran" +
        (o ? " (e.g. a " + std::string(ToString(o->kind)) + " op on stage " +
                 std::to_string(o->rank) + ", stream " + ToString(o->stream) + ")"
           : std::string()));
  }
  return std::move(out_);
}

}  // namespace

EventTrace RunEvents(const StepGraph& graph) { return Engine(graph).Run(); }

}  // namespace meshplan
