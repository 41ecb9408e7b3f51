#include "planner/cost/cost_difference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "planner/units_format.h"

namespace meshplan {
namespace {

// The lines of `plan` beside those of `other` (both lists from the same function, so the
// same keys in the same order), leaving out the lines that are 0 on both and, when
// `shown_only`, the lines the report shows for neither.
std::vector<TermDifference> Pair(const std::vector<CostTerm>& plan,
                                 const std::vector<CostTerm>& other, bool shown_only) {
  std::vector<TermDifference> out;
  for (size_t i = 0; i < plan.size() && i < other.size(); ++i) {
    if (plan[i].value == 0 && other[i].value == 0) continue;
    if (shown_only && !plan[i].shown && !other[i].shown) continue;
    out.push_back({plan[i], other[i]});
  }
  return out;
}

std::string Signed(double value, bool bytes) {
  const double size = std::abs(value);
  return (value < 0 ? "-" : "+") + (bytes ? FormatGiB(size) : FormatSeconds(size));
}

// The lines (not the "of which" shares) whose difference has the sign of `direction`,
// largest first, at most `n`.
std::vector<const TermDifference*> Largest(const std::vector<TermDifference>& lines,
                                           double direction, size_t n) {
  std::vector<const TermDifference*> out;
  for (const TermDifference& line : lines)
    if (!line.plan.of_which && line.difference() * direction > 0) out.push_back(&line);
  std::sort(out.begin(), out.end(), [](const TermDifference* a, const TermDifference* b) {
    return std::abs(a->difference()) > std::abs(b->difference());
  });
  if (out.size() > n) out.resize(n);
  return out;
}

std::string Trimmed(const std::string& name) {
  return name.substr(std::min(name.find_first_not_of(' '), name.size()));
}

// The sentence of the header comment.
std::string Summary(const CostDifference& d) {
  const double slower = d.time_plan - d.time_other;
  const double percent = std::abs(PercentOf(slower, d.time_other));
  std::string out;
  if (percent < 0.05) {
    out = fmt::format("{} is as fast as {}", d.plan, d.other);
  } else {
    out = fmt::format("{} is {:.{}f}% {} than {}", d.plan, percent, percent < 10 ? 1 : 0,
                      slower > 0 ? "slower" : "faster", d.other);
    const std::vector<const TermDifference*> causes = Largest(d.time, slower, 2);
    for (size_t i = 0; i < causes.size(); ++i)
      out += fmt::format("{}{} ({})", i == 0 ? ", mostly from its " : " and ",
                         Trimmed(causes[i]->plan.name), Signed(causes[i]->difference(), false));
  }
  const double more = d.memory_plan - d.memory_other;
  if (std::abs(more) < 5e6) return out + "; it needs the same memory per GPU.";
  out += fmt::format("; it needs {} {} per GPU", FormatGiB(std::abs(more)), more > 0 ? "more" : "less");
  const std::vector<const TermDifference*> part = Largest(d.memory, more, 1);
  if (!part.empty())
    out += fmt::format(", most {} {} ({})", more > 0 ? "for" : "from", part[0]->plan.name,
                       Signed(part[0]->difference(), true));
  return out + ".";
}

nlohmann::json LinesToJson(const std::vector<TermDifference>& lines) {
  nlohmann::json out = nlohmann::json::array();
  for (const TermDifference& line : lines)
    out.push_back({{"key", line.plan.key},
                   {"name", Trimmed(line.plan.name)},
                   {"plan", line.plan.value},
                   {"other", line.other.value},
                   {"difference", line.difference()}});
  return out;
}

}  // namespace

CostDifference DiffCosts(const RankedPlan& plan, const RankedPlan& other, const ModelSpec& model) {
  CostDifference d;
  d.plan = ToShortPlanString(plan.plan);
  d.other = ToShortPlanString(other.plan);
  d.memory = Pair(MemoryTerms(plan.cost.memory), MemoryTerms(other.cost.memory), false);
  d.time = Pair(TimeTerms(plan.cost.time, model, plan.plan),
                TimeTerms(other.cost.time, model, other.plan), true);
  d.memory_plan = plan.cost.memory.total_bytes;
  d.memory_other = other.cost.memory.total_bytes;
  d.time_plan = plan.cost.time.total_s;
  d.time_other = other.cost.time.total_s;
  d.summary = Summary(d);
  return d;
}

nlohmann::json CostDifferenceToJson(const CostDifference& d) {
  const auto total = [](double plan, double other) {
    return nlohmann::json{{"plan", plan}, {"other", other}, {"difference", plan - other}};
  };
  return {{"plan", d.plan},
          {"other", d.other},
          {"memory", LinesToJson(d.memory)},
          {"memory_total", total(d.memory_plan, d.memory_other)},
          {"time", LinesToJson(d.time)},
          {"time_total", total(d.time_plan, d.time_other)},
          {"summary", d.summary}};
}

std::string FormatCostDifference(const CostDifference& d, const std::string& indent) {
  std::string out;
  const auto line = [&](const std::string& name, const std::string& a, const std::string& b,
                        const std::string& difference) {
    fmt::format_to(std::back_inserter(out), "{}{:<36}{:>12}{:>12}{:>12}\n", indent, name, a, b,
                   difference);
  };
  const auto gib = [](double bytes) { return fmt::format("{:.2f}", ToGiB(bytes)); };
  const auto s = [](double seconds) { return fmt::format("{:.4f}", seconds); };
  line("", "this plan", "best plan", "difference");
  out += indent + "Memory per GPU (GiB)\n";
  for (const TermDifference& l : d.memory)
    line("  " + l.plan.name, gib(l.plan.value), gib(l.other.value),
         fmt::format("{:+.2f}", ToGiB(l.difference())));
  line("  total (peak)", gib(d.memory_plan), gib(d.memory_other),
       fmt::format("{:+.2f}", ToGiB(d.memory_plan - d.memory_other)));
  out += indent + "Step time (s)\n";
  for (const TermDifference& l : d.time)
    line("  " + l.plan.name, s(l.plan.value), s(l.other.value),
         fmt::format("{:+.4f}", l.difference()));
  line("  total", s(d.time_plan), s(d.time_other), fmt::format("{:+.4f}", d.time_plan - d.time_other));
  return out + indent + d.summary + "\n";
}

}  // namespace meshplan
