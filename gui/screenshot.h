// Screenshots of the explorer: read the OpenGL back buffer, write a PNG.
//
// ReadBackBuffer() must be called with the window's GL context current, after the
// frame was rendered and before it is swapped. Pixels come back as RGB rows from
// the top (PNG order). WritePng() uses stb_image_write (Debian's libstb).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshplan {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3 bytes, top row first
};

RgbImage ReadBackBuffer(int width, int height);

// False (with *error set) when the file cannot be written. The file lands whole or not at all,
// and only over a new path or a regular file (planner/atomic_file.h).
bool WritePng(const std::string& path, const RgbImage& image, std::string* error);

}  // namespace meshplan
