// `meshplan gui`: the Dear ImGui explorer (gui/), built when MESHPLAN_WITH_GUI is on
// and ImGui, GLFW and OpenGL were found.
//
//   meshplan gui [--model M --cluster C --global-batch B --seq S --precision P]
//                [--plan "dp=2,tp=4,zero=1"] [--plan-file plan.yaml] [--measured measured.json]
//                [--search] [--tab search|timeline|measured]
//                [--screenshot out.png [--frames N] [--layout-out layout.json]]
//                [--width W --height H] [--scale S]
//
// With --screenshot it renders N frames in a hidden window (use xvfb-run where there
// is no display), writes the last one as a PNG and exits: 0 written, 1 no window or
// PNG, 2 bad input. Without it the window stays until closed.
#if MESHPLAN_GUI_ENABLED

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/setup_options.h"
#include "gui/app.h"
#include "gui/explorer_state.h"
#include "gui/tradeoffs.h"
#include "planner/config/config_loader.h"
#include "planner/input_error.h"
#include "planner/output_path.h"

namespace meshplan {
namespace {

struct GuiCommandOptions {
  SetupOptions setup;
  std::string plan;       // ParsePlanString syntax; empty: a valid plan near dp = all GPUs
  std::string plan_file;  // model, cluster, training and plan from a plan YAML
  std::string measured;   // a measured.json from `meshplan run`
  bool search = false;    // run the search before the first frame
  std::string tab = "search";
  AppOptions app;
};

int RunGui(const CLI::App& command, const GuiCommandOptions& options) {
  CheckDistinctOutputs({{"--screenshot", options.app.screenshot_path},
                        {"--layout-out", options.app.layout_path}});
  auto state = std::make_unique<ExplorerState>();  // large; and it owns a std::future
  if (!options.plan_file.empty()) {
    RefuseSetupFlagsBesidePlanFile(command);
    PlanFile file = LoadPlanFile(options.plan_file);
    InitExplorerState(*state, file.model, file.model.name, file.cluster, file.cluster.name,
                      file.training, file.plan);
  } else {
    TrainingSetup setup = ResolveSetup(options.setup);
    // --plan as estimate reads it, kept as given (the GUI shows violations); without one,
    // dp = all GPUs moved to the nearest valid plan.
    ParallelPlan plan = ParsePlanOption(options.plan, setup.cluster.world_size());
    if (command.count("--plan") == 0)
      plan = FitPlanToSetup(setup.model, setup.cluster, setup.training, plan);
    InitExplorerState(*state, std::move(setup.model), options.setup.model,
                      std::move(setup.cluster), options.setup.cluster, setup.training, plan);
  }
  if (!options.measured.empty() && !LoadMeasuredInto(*state, options.measured))
    throw InputError({options.measured}, "--measured", state->ui.error);

  state->ui.tab = options.tab == "timeline"   ? ExplorerTab::kTimeline
                  : options.tab == "measured" ? ExplorerTab::kMeasured
                                              : ExplorerTab::kSearch;
  RecomputeIfChanged(*state);
  if (!state->derived.violations.empty()) {
    std::cerr << "meshplan gui: the plan " << ToShortPlanString(state->inputs.plan)
              << " is not valid here:\n";
    for (const PlanViolation& v : state->derived.violations)
      std::cerr << "  " << v.constraint << ": " << v.message << "\n";
  }
  if (options.search) RunSearchNow(*state);
  return RunExplorer(*state, options.app);
}

}  // namespace

void AddGuiCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<GuiCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "gui", "the explorer: a window to try plans and see memory, time and trade-offs at once");
  AddSetupOptions(command, &options->setup);
  command->add_option("--plan", options->plan,
                      "the plan to start from, e.g. \"dp=2,tp=4,zero=1\" (omitted keys keep "
                      "their defaults; no --plan: the valid plan closest to dp = all GPUs)");
  command->add_option("--plan-file", options->plan_file,
                      "a plan YAML: supplies model, cluster, training and plan");
  command->add_option("--measured", options->measured,
                      "a measured.json from `meshplan run`, shown beside the prediction");
  command->add_flag("--search", options->search, "run the plan search before the first frame");
  command->add_option("--tab", options->tab, "the open tab: search | timeline | measured")
      ->check(CLI::IsMember({"search", "timeline", "measured"}))
      ->capture_default_str();
  CLI::Option* screenshot = command->add_option("--screenshot", options->app.screenshot_path,
                      "render off-screen, write this PNG and exit (no display: use xvfb-run -a)")
      ->check(OutputFile());
  command->add_option("--frames", options->app.frames, "frames to render before the screenshot")
      ->check(IntegerInRange(1, 1000, "frames"))
      ->capture_default_str();
  command->add_option("--layout-out", options->app.layout_path,
                      "with --screenshot: also write where the panels, bars, capacity line and "
                      "texts were drawn (JSON)")
      ->needs(screenshot)
      ->check(OutputFile());
  command->add_option("--width", options->app.width, "window width (screen coordinates)")
      ->check(IntegerInRange(320, 16384, "screen coordinates"))
      ->capture_default_str();
  command->add_option("--height", options->app.height, "window height (screen coordinates)")
      ->check(IntegerInRange(240, 16384, "screen coordinates"))
      ->capture_default_str();
  command->add_option("--scale", options->app.ui_scale,
                      "UI scale (fonts and sizes); default: the monitor's DPI scale")
      ->check(FiniteInRange(0.5, 4.0));
  command->callback([command, options, exit_code] { *exit_code = RunGui(*command, *options); });
}

}  // namespace meshplan

#endif  // MESHPLAN_GUI_ENABLED
