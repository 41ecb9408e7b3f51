#include "gui/app.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "gui/drawn_layout.h"
#include "gui/panels.h"
#include "gui/screenshot.h"
#include "planner/atomic_file.h"

namespace meshplan {
namespace {

// The UI font (Debian's fonts-dejavu-core); ImGui's built-in bitmap font if it is missing.
constexpr const char* kUiFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr float kUiFontSizePx = 15.0f;  // at scale 1
constexpr const char* kGlslVersion = "#version 330 core";

void PrintGlfwError(int code, const char* description) {
  std::fprintf(stderr, "meshplan gui: GLFW error %d: %s\n", code, description);
}

// The DPI scale: the window's content scale, else the primary monitor's, else 1.
float ContentScale(GLFWwindow* window) {
  float x = 0, y = 0;
  glfwGetWindowContentScale(window, &x, &y);
  if (x <= 0) {
    if (GLFWmonitor* monitor = glfwGetPrimaryMonitor()) glfwGetMonitorContentScale(monitor, &x, &y);
  }
  return x > 0 ? x : 1.0f;
}

// Style and fonts for one scale; called again when the window moves to another DPI.
void ApplyScale(float scale) {
  ImGuiStyle& style = ImGui::GetStyle();
  style = ImGuiStyle();
  ImGui::StyleColorsDark(&style);
  style.WindowRounding = 4.0f;
  style.FrameRounding = 3.0f;
  style.WindowPadding = ImVec2(10, 8);
  style.ItemSpacing = ImVec2(8, 5);
  style.ScaleAllSizes(scale);

  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  if (std::filesystem::exists(kUiFontPath)) {
    io.Fonts->AddFontFromFileTTF(kUiFontPath, std::round(kUiFontSizePx * scale));
  } else {
    ImFontConfig config;
    config.SizePixels = std::round(13.0f * scale);
    io.Fonts->AddFontDefault(&config);
  }
}

bool WriteText(const std::string& path, const std::string& text) {
  try {
    WriteFileAtomically(path, text);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meshplan gui: %s\n", e.what());
    return false;
  }
}

}  // namespace

int RunExplorer(ExplorerState& state, const AppOptions& options) {
  const bool screenshot = !options.screenshot_path.empty();

  // ===== setup: GLFW, window + GL context, ImGui, back ends ==================
  glfwSetErrorCallback(PrintGlfwError);
  if (!glfwInit()) {
    std::fprintf(stderr, "meshplan gui: cannot open a display (run under xvfb-run for "
                         "--screenshot on a machine without one)\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  glfwWindowHint(GLFW_VISIBLE, screenshot ? GLFW_FALSE : GLFW_TRUE);
  // An interactive window grows with the monitor's DPI; a screenshot keeps its exact size.
  glfwWindowHint(GLFW_SCALE_TO_MONITOR, screenshot ? GLFW_FALSE : GLFW_TRUE);
  GLFWwindow* window =
      glfwCreateWindow(options.width, options.height, "meshplan explorer", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "meshplan gui: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(screenshot ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed: nothing to remember
  float scale = options.ui_scale > 0 ? options.ui_scale : ContentScale(window);
  ApplyScale(scale);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init(kGlslVersion);

  // ===== frame loop ==========================================================
  int status = 0;
  for (int frame = 0; !glfwWindowShouldClose(window); ++frame) {
    // Idle windows sleep until an event (or a quarter second: the search's progress).
    if (screenshot || state.search.running)
      glfwPollEvents();
    else
      glfwWaitEventsTimeout(0.25);
    if (options.ui_scale <= 0) {
      const float now = ContentScale(window);
      if (now != scale) {  // moved to a monitor with another DPI: rebuild the font atlas
        scale = now;
        ApplyScale(scale);
        ImGui_ImplOpenGL3_DestroyFontsTexture();
        ImGui_ImplOpenGL3_CreateFontsTexture();
      }
    }
    PollBackgroundWork(state);
    RecomputeIfChanged(state);

    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    state.drawn = DrawnLayout{};
    state.drawn.ui_scale = scale;
    DrawExplorer(state);
    ImGui::Render();

    int fb_width = 0, fb_height = 0;
    glfwGetFramebufferSize(window, &fb_width, &fb_height);
    state.drawn.framebuffer_width = fb_width;
    state.drawn.framebuffer_height = fb_height;
    glViewport(0, 0, fb_width, fb_height);
    const ImVec4 clear = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
    glClearColor(clear.x, clear.y, clear.z, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

    if (screenshot && frame + 1 >= options.frames) {
      std::string error;
      if (!WritePng(options.screenshot_path, ReadBackBuffer(fb_width, fb_height), &error)) {
        std::fprintf(stderr, "meshplan gui: %s\n", error.c_str());
        status = 1;
      } else if (!options.layout_path.empty() &&
                 !WriteText(options.layout_path, DrawnLayoutToJson(state.drawn))) {
        std::fprintf(stderr, "meshplan gui: cannot write %s\n", options.layout_path.c_str());
        status = 1;
      }
      break;
    }
    glfwSwapBuffers(window);
  }

  // ===== cleanup, in reverse =================================================
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return status;
}

}  // namespace meshplan
