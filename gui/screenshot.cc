#include "gui/screenshot.h"

#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <stb_image_write.h>  // implementation: libstb (linked through pkg-config stb)

#include <cstring>
#include <exception>

#include "planner/atomic_file.h"

namespace meshplan {

RgbImage ReadBackBuffer(int width, int height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.rgb.resize(static_cast<size_t>(width) * height * 3);
  std::vector<uint8_t> bottom_up(image.rgb.size());
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, bottom_up.data());
  const size_t row = static_cast<size_t>(width) * 3;
  for (int y = 0; y < height; ++y)  // GL's first row is the bottom one
    std::memcpy(image.rgb.data() + y * row, bottom_up.data() + (height - 1 - y) * row, row);
  return image;
}

bool WritePng(const std::string& path, const RgbImage& image, std::string* error) {
  if (image.width <= 0 || image.height <= 0) {
    *error = "empty image";
    return false;
  }
  std::string png;  // encoded in memory, then written whole (planner/atomic_file.h)
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
  };
  if (!stbi_write_png_to_func(append, &png, image.width, image.height, 3, image.rgb.data(),
                              image.width * 3)) {
    *error = "cannot encode the PNG for " + path;
    return false;
  }
  try {
    WriteFileAtomically(path, png);
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
  return true;
}

}  // namespace meshplan
