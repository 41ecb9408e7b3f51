// CheckFigures: the last check before a result is printed.
//
// The loaders bound every input (docs/limits.md), so every figure meshplan prints (times,
// rates, bytes, FLOPs, utilisations) is finite and non-negative. One that is not is a bug
// in meshplan, never a result: these throw FigureError, which the CLI reports as an
// unexpected error (exit 1) with the figure and the inputs that produced it, so that no
// command exits 0 with inf, nan or a negative time. `inputs` names them ("model llama2-7b,
// cluster 8xH100, ...": DescribeInputs).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "planner/plan_cost.h"
#include "planner/training_setup.h"

namespace meshplan {

class FigureError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// "model M, cluster C (GPU G), global batch B, seq S, plan P".
std::string DescribeInputs(const PlanFile& setup);

// Throws FigureError unless 0 <= value < infinity.
void CheckFigure(double value, std::string_view figure, const std::string& inputs);
// Every time of the breakdown.
void CheckFigures(const StepTimeBreakdown& time, const std::string& inputs);
// Every figure of the cost: FLOPs, memory, communication, times, rates, utilisations.
void CheckFigures(const PlanCost& cost, const std::string& inputs);

}  // namespace meshplan
