#include "planner/search/candidate_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "planner/input_error.h"
#include "planner/names.h"
#include "planner/plan_fields.h"

namespace meshplan {
namespace {

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         Lower(text.substr(text.size() - suffix.size())) == suffix;
}

// A CSV text field: quoted, with quotes doubled (RFC 4180).
void AppendCsvText(std::string* out, const std::string& text) {
  out->push_back('"');
  for (char c : text) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

// A JSON string: quoted, with quotes, backslashes and control characters escaped.
void AppendJsonText(std::string* out, const std::string& text) {
  out->push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(std::back_inserter(*out), "\\u{:04x}", static_cast<int>(c));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// The columns after the plan's fields: what the cost model says of it.
constexpr const char* kCostColumns[] = {
    "fits", "reason",
    // memory of the worst stage's rank, at its peak (planner/plan_cost.h MemoryBreakdown)
    "memory_bytes", "params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
    "logits_bytes", "comm_buffer_bytes", "gathered_params_bytes", "transient_bytes",
    "runtime_bytes", "peak_phase", "worst_stage",
    // host memory of that rank (offload) and of its node
    "host_bytes", "host_optimizer_bytes", "host_activations_bytes", "host_params_bytes",
    "host_bytes_per_node", "fits_host",
    // step time (planner/plan_cost.h StepTimeBreakdown)
    "step_s", "compute_s", "recompute_s", "exposed_dp_s", "exposed_tp_s", "exposed_pp_s",
    "exposed_cp_s", "exposed_ep_s", "bubble_s", "optimizer_s", "offload_s", "overlap_slowdown_s",
    "tokens_per_s", "tokens_per_s_per_gpu", "model_flops_per_s_per_gpu", "mfu",
    "mfu_no_attention", "hfu", "mfu_fp8_peak"};

}  // namespace

CandidateDump::Format CandidateDump::FormatOf(const std::string& path, const std::string& flag) {
  if (EndsWith(path, ".csv")) return Format::kCsv;
  if (EndsWith(path, ".jsonl")) return Format::kJsonl;
  throw InputError({"<command line>"}, flag,
                   "expected a file name ending in .csv (CSV with a header row) or .jsonl (JSON "
                   "Lines); got '" + path + "'");
}

const std::vector<std::string>& CandidateDump::Columns() {
  static const std::vector<std::string> kColumns = [] {
    std::vector<std::string> columns = {"ordinal", "plan"};
    for (const PlanFieldSpec& f : PlanFields())  // the grid axes (planner/plan_fields.h)
      if (f.role == PlanFieldRole::kAxis) columns.push_back(f.key);
    columns.insert(columns.end(), std::begin(kCostColumns), std::end(kCostColumns));
    return columns;
  }();
  return kColumns;
}

CandidateDump::CandidateDump(const std::string& path, const std::string& flag)
    : format_(FormatOf(path, flag)), writer_(path) {
  if (format_ != Format::kCsv) return;
  std::string header;
  for (const std::string& c : Columns()) header += (header.empty() ? "" : ",") + c;
  writer_.Write(header + "\n");
}

void CandidateDump::FormatRow(const ParallelPlan& p, const PlanCost& c, int64_t ordinal,
                              std::string* buffer) const {
  const MemoryBreakdown& m = c.memory;
  const StepTimeBreakdown& t = c.time;
  const bool csv = format_ == Format::kCsv;
  const std::vector<std::string>& names = Columns();
  size_t column = 0;
  auto out = std::back_inserter(*buffer);
  if (!csv) buffer->push_back('{');
  // Each value after its key (JSON) or a comma (CSV); numbers in shortest round-trip form.
  auto key = [&] {
    if (column > 0) buffer->push_back(',');
    if (!csv) {
      AppendJsonText(buffer, names[column]);
      buffer->push_back(':');
    }
    ++column;
  };
  auto number = [&](auto value) {
    key();
    fmt::format_to(out, "{}", value);
  };
  auto text = [&](const std::string& value) {
    key();
    csv ? AppendCsvText(buffer, value) : AppendJsonText(buffer, value);
  };
  auto boolean = [&](bool value) {
    key();
    buffer->append(csv ? (value ? "1" : "0") : (value ? "true" : "false"));
  };
  number(ordinal);
  text(ToPlanString(p));
  for (const PlanFieldSpec& f : PlanFields()) {
    if (f.role != PlanFieldRole::kAxis) continue;
    switch (f.kind) {
      case PlanFieldKind::kInt: number(f.get(p)); break;
      case PlanFieldKind::kBool: boolean(f.get(p) != 0); break;
      case PlanFieldKind::kEnum: text(f.name(f.get(p))); break;
    }
  }
  boolean(c.fits);
  text(c.reason);
  number(m.total_bytes);
  number(m.params_bytes);
  number(m.grads_bytes);
  number(m.optimizer_bytes);
  number(m.activations_bytes);
  number(m.logits_bytes);
  number(m.comm_buffer_bytes);
  number(m.gathered_params_bytes);
  number(m.transient_bytes);
  number(m.runtime_bytes());
  text(m.peak_phase);
  number(m.worst_stage);
  number(m.host_total_bytes());
  number(m.host_optimizer_bytes);
  number(m.host_activations_bytes);
  number(m.host_params_bytes);
  number(c.host_bytes_per_node);
  boolean(c.fits_host);
  number(t.total_s);
  number(t.compute_s);
  number(t.recompute_s);
  number(t.exposed_comm_s[MeshDim::kDp]);
  number(t.exposed_comm_s[MeshDim::kTp]);
  number(t.exposed_comm_s[MeshDim::kPp]);
  number(t.exposed_comm_s[MeshDim::kCp]);
  number(t.exposed_comm_s[MeshDim::kEp]);
  number(t.bubble_s);
  number(t.optimizer_s);
  number(t.offload_s);
  number(t.overlap_slowdown_s);
  number(c.tokens_per_s);
  number(c.tokens_per_s_per_gpu);
  number(c.model_flops_per_s_per_gpu);
  number(c.mfu);
  number(c.mfu_no_attention);
  number(c.hfu);
  number(c.mfu_fp8_peak);
  if (!csv) buffer->push_back('}');
  buffer->push_back('\n');
}

void CandidateDump::AddMesh(int64_t mesh_index, std::string rows) {
  std::lock_guard lock(mutex_);
  if (mesh_index != next_mesh_) {
    waiting_.emplace(mesh_index, std::move(rows));
    return;
  }
  waiting_.emplace(mesh_index, std::move(rows));
  WriteReady();
}

void CandidateDump::WriteReady() {
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_mesh_;
       it = waiting_.erase(it), ++next_mesh_) {
    if (!error_.empty()) continue;  // after a failure: drop the rows, Commit() reports it
    rows_ += std::count(it->second.begin(), it->second.end(), '\n');
    try {
      writer_.Write(it->second);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
}

void CandidateDump::Commit() {
  std::lock_guard lock(mutex_);
  if (!error_.empty()) throw std::runtime_error(error_);
  if (!waiting_.empty())
    throw std::logic_error(fmt::format("candidate dump: mesh {} was never handed over",
                                       next_mesh_));
  writer_.Commit();
}

}  // namespace meshplan
