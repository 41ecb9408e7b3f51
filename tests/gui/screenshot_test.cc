// `meshplan gui --screenshot` under Xvfb (Mesa software OpenGL): the PNG is written,
// is not blank, and the Memory panel shows the bars and the capacity line in their
// palette colours where the cost model puts them. The app's --layout-out sidecar
// says where it drew; the test checks that against its own Estimate() and then
// looks at the pixels there. The layout test reads the sidecar's panels and texts:
// dense and MoE, at 1600x1000 and 1280x800, the panels tile the window and no
// recorded text is cut or overlaps another. xvfb-run is required
// (scripts/install_deps.sh installs it).
#include <catch2/catch.hpp>
#include <stb_image.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gui/palette.h"
#include "planner/config/config_loader.h"
#include "planner/config/framework_yaml.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/memory_model.h"
#include "tests/planner/test_util.h"

namespace meshplan {
namespace {

constexpr int kWidth = 1600, kHeight = 1000;

bool HaveXvfbRun() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  Rgb At(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

bool Near(Rgb a, Rgb b, int tolerance) {
  return std::abs(a.r - b.r) <= tolerance && std::abs(a.g - b.g) <= tolerance &&
         std::abs(a.b - b.b) <= tolerance;
}

Rgb ToRgb(const nlohmann::json& c) { return {c[0].get<uint8_t>(), c[1].get<uint8_t>(), c[2].get<uint8_t>()}; }

struct Shot {
  Image image;
  nlohmann::json layout;
};

// Runs the app under Xvfb for `args`, returns the PNG and the layout sidecar.
Shot Screenshot(const std::string& name, const std::string& args, int width = kWidth,
                int height = kHeight) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("meshplan_gui_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string png = (dir / (name + ".png")).string();
  const std::string json = (dir / (name + ".json")).string();
  const std::string command =
      "xvfb-run -a -s '-screen 0 1920x1200x24' '" + std::string(MESHPLAN_BINARY) + "' gui " +
      args + " --width " + std::to_string(width) + " --height " + std::to_string(height) +
      " --scale 1 --screenshot '" + png + "' --layout-out '" + json + "' 2>&1";
  INFO(command);
  const int status = std::system(command.c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  Shot shot;
  int channels = 0;
  unsigned char* data = stbi_load(png.c_str(), &shot.image.width, &shot.image.height, &channels, 3);
  REQUIRE(data != nullptr);
  shot.image.rgb.assign(data, data + static_cast<size_t>(shot.image.width) * shot.image.height * 3);
  stbi_image_free(data);
  std::ifstream in(json);
  REQUIRE(in.good());
  shot.layout = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  return shot;
}

// The fraction of the probe points along the capacity line, across the plot and
// outside the bars that reach above it, that show the capacity colour.
double CapacityLineHits(const Shot& shot) {
  const auto& m = shot.layout["memory"];
  const double line_y = m["capacity_y"].get<double>();
  const int y = static_cast<int>(std::floor(line_y));
  const Rgb color = ToRgb(m["capacity_color"]);
  auto under_a_bar = [&](double x) {
    for (const auto& bar : m["bars"])
      if (bar["rect"][1].get<double>() < line_y + 3 && x > bar["rect"][0].get<double>() - 3 &&
          x < bar["rect"][2].get<double>() + 3)
        return true;
    return false;
  };
  int probes = 0, hits = 0;
  for (double x = m["plot"][0].get<double>() + 3; x < m["plot"][2].get<double>() - 3; x += 2) {
    if (under_a_bar(x)) continue;
    ++probes;
    hits += Near(shot.image.At(static_cast<int>(x), y), color, 24);
  }
  REQUIRE(probes >= 50);
  return static_cast<double>(hits) / probes;
}

// A sidecar rectangle [x0, y0, x1, y1]; half a pixel of slack for rounding.
struct Box {
  double x0, y0, x1, y1;
  explicit Box(const nlohmann::json& r) : x0(r[0]), y0(r[1]), x1(r[2]), y1(r[3]) {}
  bool Inside(const Box& o) const {
    return x0 >= o.x0 - 0.5 && y0 >= o.y0 - 0.5 && x1 <= o.x1 + 0.5 && y1 <= o.y1 + 0.5;
  }
  bool Overlaps(const Box& o) const {
    return x0 < o.x1 - 0.5 && o.x0 < x1 - 0.5 && y0 < o.y1 - 0.5 && o.y0 < y1 - 0.5;
  }
};

// The recorded texts of `panel`.
std::vector<std::string> TextsOf(const nlohmann::json& layout, const std::string& panel) {
  std::vector<std::string> texts;
  for (const auto& t : layout["texts"])
    if (t["panel"] == panel) texts.push_back(t["text"].get<std::string>());
  return texts;
}

}  // namespace

TEST_CASE("gui --screenshot draws the memory bars and the capacity line", "[gui][screenshot]") {
  if (!HaveXvfbRun()) FAIL("xvfb-run is missing: scripts/install_deps.sh installs it (Debian package xvfb)");
  const std::string setup = "--model llama2-7b --cluster 8xH100 --global-batch 64 --seq 4096";
  const std::string plan = "dp=2,tp=4,sp=1,zero=1";
  const Shot shot = Screenshot("fits", setup + " --plan " + plan);
  const Image& img = shot.image;
  REQUIRE(img.width == kWidth);
  REQUIRE(img.height == kHeight);

  // Not blank: a rendered UI has many distinct colours.
  std::set<uint32_t> colors;
  for (size_t i = 0; i < img.rgb.size(); i += 3 * 7)
    colors.insert(img.rgb[i] << 16 | img.rgb[i + 1] << 8 | img.rgb[i + 2]);
  CHECK(colors.size() > 50);
  for (const char* panel : {"Setup", "Knobs", "Memory per GPU", "Trade-offs", "Step time", "Search"})
    CHECK(shot.layout["panels"].contains(panel));

  // Where the bars must be: the sidecar against this test's own estimate.
  TrainingSpec training;
  training.global_batch = 64;
  training.seq_len = 4096;
  training.framework = LoadFramework("megatron-core");  // the GUI's default on a GPU
  const ModelSpec model = LoadModel("llama2-7b");
  const ParallelPlan p = ParsePlanString(plan);
  const PlanCost cost = Estimate(model, LoadCluster("8xH100"), training, p);
  const double seed = EstimateMemory(model, training, p, MemoryModel::kSeed).total_bytes;
  const auto& m = shot.layout["memory"];
  REQUIRE(m["drawn"].get<bool>());
  REQUIRE(m["bars"].size() == 2);  // pp = 1: the detailed bar and the seed bar
  CHECK(m["bars"][0]["total_bytes"].get<double>() == Approx(cost.memory.total_bytes));
  CHECK(m["bars"][1]["total_bytes"].get<double>() == Approx(seed));
  CHECK(m["bars"][0]["fits"].get<bool>());
  CHECK(m["capacity_color"] == nlohmann::json({kColorCapacityLine.r, kColorCapacityLine.g,
                                                kColorCapacityLine.b}));

  const double y0 = m["plot"][1], y1 = m["plot"][3], axis_max = m["axis_max_bytes"];
  const double px_per_byte = (y1 - y0) / axis_max;
  // The capacity line sits at the GPU's memory on the axis ...
  CHECK(m["capacity_y"].get<double>() ==
        Approx(y1 - m["capacity_bytes"].get<double>() * px_per_byte).margin(1.0));
  // ... and is drawn there in its colour.
  CHECK(CapacityLineHits(shot) > 0.9);

  for (const auto& bar : m["bars"]) {
    INFO("bar " << bar["label"]);
    // The bar's height is its total on the axis; the bottom is the axis' zero.
    const double top = bar["rect"][1], bottom = bar["rect"][3];
    CHECK(bottom == Approx(y1).margin(1.0));
    CHECK(bottom - top == Approx(bar["total_bytes"].get<double>() * px_per_byte).margin(1.5));
    const int cx = static_cast<int>((bar["rect"][0].get<double>() + bar["rect"][2].get<double>()) / 2);
    int painted = 0;
    for (const auto& s : bar["segments"]) {
      INFO("segment " << s["name"]);
      const double sy0 = s["rect"][1], sy1 = s["rect"][3];
      CHECK(sy1 - sy0 == Approx(s["bytes"].get<double>() * px_per_byte).margin(1.0));
      if (sy1 - sy0 < 4) continue;  // too thin to probe without touching a neighbour
      const Rgb expected = ToRgb(s["color"]);
      for (double f : {0.3, 0.5, 0.7})
        CHECK(Near(img.At(cx, static_cast<int>(sy0 + (sy1 - sy0) * f)), expected, 4));
      ++painted;
    }
    CHECK(painted >= 3);  // params, grads, optimizer and activations are all tall here
    // Just above the bar there is no bar colour.
    const Rgb above = img.At(cx, static_cast<int>(top) - 4);
    for (const auto& s : bar["segments"]) CHECK_FALSE(Near(above, ToRgb(s["color"]), 4));
  }
  // The seed model's activations (docs/cost_model.md 2(a)) are larger than the detailed ones here.
  CHECK(m["bars"][1]["rect"][1].get<double>() < m["bars"][0]["rect"][1].get<double>());
}

TEST_CASE("gui --screenshot outlines a bar that does not fit in red", "[gui][screenshot]") {
  if (!HaveXvfbRun()) FAIL("xvfb-run is missing: scripts/install_deps.sh installs it (Debian package xvfb)");
  // Llama 2 70B with plain data parallel: 16 bytes per parameter alone is > 1 TB per GPU.
  const Shot shot = Screenshot("oom", "--model llama2-70b --cluster 8xH100 --plan dp=8");
  const auto& m = shot.layout["memory"];
  REQUIRE(m["drawn"].get<bool>());
  const auto& bar = m["bars"][0];
  CHECK_FALSE(bar["fits"].get<bool>());
  CHECK(bar["total_bytes"].get<double>() > m["capacity_bytes"].get<double>());
  const Rgb red = ToRgb(m["does_not_fit_color"]);
  CHECK(red == kColorDoesNotFit);
  // The outline runs along both sides of the bar.
  const int left = static_cast<int>(bar["rect"][0].get<double>()) - 1;
  const int right = static_cast<int>(bar["rect"][2].get<double>());
  const double top = bar["rect"][1], bottom = bar["rect"][3];
  int probes = 0, hits = 0;
  for (double y = top + 4; y < bottom - 4; y += 5)
    for (int x : {left, right}) {
      ++probes;
      hits += Near(shot.image.At(x, static_cast<int>(y)), red, 40);
    }
  REQUIRE(probes > 10);
  CHECK(static_cast<double>(hits) / probes > 0.9);
  // The capacity line is below the bar's top, drawn across it.
  CHECK(m["capacity_y"].get<double>() > top);
}

TEST_CASE("gui lays out every panel without overlap or cut text, dense and MoE, at two sizes",
          "[gui][screenshot]") {
  if (!HaveXvfbRun()) FAIL("xvfb-run is missing: scripts/install_deps.sh installs it (Debian package xvfb)");
  const std::string setup = " --cluster 64xH100 --global-batch 256 --seq 4096 --search --tab search";
  const struct {
    std::string name, model, shown;  // shown: the model combo's text
    size_t charts;                   // trade-off charts: ZeRO, tp (and ep for MoE)
  } models[] = {
      {"dense", "llama3-70b", "llama3-70b", 2},
      // Loaded from a path: the combo names it by the file's stem.
      {"moe", std::string(MESHPLAN_SOURCE_DIR) + "/configs/models/mixtral-8x7b.yaml",
       "mixtral-8x7b", 3},
  };
  for (const auto& m : models)
    for (const auto& [width, height] : {std::pair{1600, 1000}, std::pair{1280, 800}}) {
      INFO(m.name << " at " << width << "x" << height);
      const Shot shot = Screenshot(m.name, "--model " + m.model + setup, width, height);
      const nlohmann::json& layout = shot.layout;

      // The top-level panels tile the framebuffer: inside it, none over another.
      const Box screen(nlohmann::json{0, 0, width, height});
      std::vector<std::pair<std::string, Box>> tiles;
      for (const auto& [name, rect] : layout["panels"].items())
        if (std::find(layout["tabs"].begin(), layout["tabs"].end(), name) == layout["tabs"].end())
          tiles.emplace_back(name, Box(rect));
      CHECK(tiles.size() == 6);
      for (size_t i = 0; i < tiles.size(); ++i) {
        INFO("panel " << tiles[i].first);
        CHECK(tiles[i].second.Inside(screen));
        for (size_t j = i + 1; j < tiles.size(); ++j) {
          INFO("and panel " << tiles[j].first);
          CHECK_FALSE(tiles[i].second.Overlaps(tiles[j].second));
        }
      }

      // Every recorded text lies within its fit region; none overlaps another of its panel.
      const auto& texts = layout["texts"];
      for (size_t i = 0; i < texts.size(); ++i) {
        const auto& t = texts[i];
        INFO(t["panel"] << ": \"" << t["text"] << "\" at " << t["rect"] << ", fit " << t["fit"]);
        CHECK(Box(t["rect"]).Inside(Box(t["fit"])));
        for (size_t j = i + 1; j < texts.size(); ++j) {
          if (texts[j]["panel"] != t["panel"]) continue;
          INFO("and \"" << texts[j]["text"] << "\" at " << texts[j]["rect"]);
          CHECK_FALSE(Box(t["rect"]).Overlaps(Box(texts[j]["rect"])));
        }
      }

      // The texts the panels must show are all recorded.
      auto has = [](const std::vector<std::string>& v, const std::string& text) {
        return std::find(v.begin(), v.end(), text) != v.end();
      };
      const auto setup_texts = TextsOf(layout, "Setup");
      CHECK(has(setup_texts, m.shown));
      CHECK(has(setup_texts, "64xH100"));
      const auto tradeoffs = TextsOf(layout, "Trade-offs");
      CHECK(has(tradeoffs, "ZeRO stage"));
      CHECK(has(tradeoffs, "tensor par."));
      CHECK(has(tradeoffs, "expert par.") == (m.charts == 3));
      for (const char* value : {"0", "1", "2", "3", "4", "8"}) CHECK(has(tradeoffs, value));
      // A title and a value under each of the four bars of every chart, at least.
      CHECK(tradeoffs.size() >= m.charts * 5);
      const auto knobs = TextsOf(layout, "Knobs");
      for (const char* label : {"data par.", "expert par.", "tp_overlap", "dp_overlap"})
        CHECK(has(knobs, label));
      CHECK(TextsOf(layout, "Search").size() >= 3);  // the plan cells of the first rows
      const auto memory = TextsOf(layout, "Memory per GPU");
      CHECK(has(memory, "detailed"));  // under its bar
      CHECK(has(memory, "seed"));
      const auto time = TextsOf(layout, "Step time");
      CHECK(has(time, "compute"));
      CHECK(time.size() >= 3);  // the headline and the parts that take time
    }
}

}  // namespace meshplan

TEST_CASE("gui --screenshot and --layout-out refuse FIFOs, devices, empty and shared paths",
          "[gui][hostile]") {
  meshplan::test::TempDir dir;
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string png = (dir.path / "out.png").string();
  const struct {
    std::string args, flag;
  } cases[] = {
      {"gui --screenshot " + fifo, "--screenshot"},
      {"gui --screenshot /dev/null", "--screenshot"},
      {"gui --screenshot ''", "--screenshot"},
      {"gui --screenshot " + png + " --layout-out " + fifo, "--layout-out"},
      {"gui --screenshot " + png + " --layout-out " + png, "--layout-out"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = meshplan::test::RunBounded(c.args);  // refused before any window opens
    CHECK(r.result.exit_code == 2);
    CHECK_THAT(r.result.output, Catch::Contains(c.flag));
  }
  CHECK(std::filesystem::is_fifo(fifo));
  CHECK(!std::filesystem::exists(png));
}
