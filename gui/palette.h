// The explorer's colours, one named constant per meaning.
//
// Plain RGB bytes (no ImGui type) so that the screenshot test can look for the
// very same colours in the PNG the app writes. Panels convert them with
// ToImU32() (gui/imgui_util.h). The memory colours are chosen to stay apart
// from each other and from the panel background under any anti-aliasing.
#pragma once

#include <array>
#include <cstdint>

namespace meshplan {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  constexpr bool operator==(const Rgb&) const = default;
};

// --- memory bar segments (bottom to top, in MemorySegment order) ---
inline constexpr Rgb kColorParams{66, 133, 244};        // blue
inline constexpr Rgb kColorGrads{255, 152, 0};          // orange
inline constexpr Rgb kColorOptimizer{52, 168, 83};      // green
inline constexpr Rgb kColorActivations{171, 71, 188};   // purple
inline constexpr Rgb kColorLogits{255, 214, 0};         // yellow
inline constexpr Rgb kColorBuffers{0, 172, 193};        // cyan: comm buckets + gathered params
inline constexpr Rgb kColorTransient{158, 158, 158};    // grey: transient peak on top
inline constexpr Rgb kColorRuntime{141, 110, 99};       // brown: CUDA context, NCCL, workspaces, allocator
// --- memory chart marks ---
inline constexpr Rgb kColorCapacityLine{255, 255, 255};  // the GPU's memory capacity
inline constexpr Rgb kColorDoesNotFit{229, 57, 53};      // outline and text of a bar over capacity
inline constexpr Rgb kColorFits{102, 187, 106};          // text "fits"
inline constexpr Rgb kColorTight{255, 179, 0};           // text "tight" (planner/plan_cost.h FitIsTight)
// --- step time split ---
inline constexpr Rgb kColorCompute{66, 133, 244};
inline constexpr Rgb kColorRecompute{121, 134, 203};
inline constexpr Rgb kColorBubble{189, 189, 189};
inline constexpr Rgb kColorOptimizerStep{52, 168, 83};
inline constexpr Rgb kColorOverlapSlowdown{92, 107, 192};  // compute slowed by overlapped comm.
inline constexpr Rgb kColorOffload{120, 144, 156};          // host copies not hidden
// Exposed communication, one colour per mesh dimension, indexed by MeshDim (dp, pp, cp, tp).
inline constexpr std::array<Rgb, 5> kColorCommByDim{  // dp, pp, cp, tp, ep (MeshDim order)
    Rgb{255, 152, 0}, Rgb{240, 98, 146}, Rgb{141, 110, 99}, Rgb{255, 213, 79},
    Rgb{0, 172, 193}};
// --- search scatter ---
inline constexpr Rgb kColorScatterPoint{120, 144, 156};
inline constexpr Rgb kColorScatterFrontier{255, 112, 67};
inline constexpr Rgb kColorScatterSelected{255, 255, 255};
// --- measured vs predicted ---
inline constexpr Rgb kColorPredicted{66, 133, 244};
inline constexpr Rgb kColorMeasured{255, 152, 0};
// --- text ---
inline constexpr Rgb kColorWarningText{255, 183, 77};
inline constexpr Rgb kColorErrorText{229, 57, 53};
inline constexpr Rgb kColorDimText{158, 158, 158};

}  // namespace meshplan
