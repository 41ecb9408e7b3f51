// safetensors reading and writing (see safetensors_file.h).
#include "tests/reference/safetensors_file.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace meshplan::test {
namespace {

at::ScalarType DtypeOf(const std::string& name, const std::string& path) {
  if (name == "F32") return at::kFloat;
  if (name == "I64") return at::kLong;
  throw std::runtime_error(path + ": dtype " + name + " is not F32 or I64");
}

std::string NameOf(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "F32";
  if (dtype == at::kLong) return "I64";
  throw std::runtime_error(std::string("safetensors: cannot write dtype ") + c10::toString(dtype));
}

}  // namespace

SafetensorsFile ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_bytes = 0;
  if (bytes.size() < 8) throw std::runtime_error(path + ": shorter than the 8-byte header length");
  std::memcpy(&header_bytes, bytes.data(), 8);
  if (header_bytes > bytes.size() - 8) throw std::runtime_error(path + ": header runs past the end");
  const size_t data_start = 8 + header_bytes;
  const nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + data_start);
  SafetensorsFile file;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [key, value] : entry.items()) file.metadata[key] = value.get<std::string>();
      continue;
    }
    const at::ScalarType dtype = DtypeOf(entry.at("dtype").get<std::string>(), path);
    const std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (offsets.size() != 2 || offsets[1] - offsets[0] != nbytes ||
        offsets[1] > bytes.size() - data_start)
      throw std::runtime_error(path + ": tensor " + name + " has bad data_offsets");
    std::memcpy(t.data_ptr(), bytes.data() + data_start + offsets[0], nbytes);
    file.tensors[name] = t;
  }
  return file;
}

void WriteSafetensors(const std::string& path, const SafetensorsFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::vector<at::Tensor> ordered;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : file.tensors) {
    at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", NameOf(t.scalar_type())}, {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    ordered.push_back(t);
  }
  const std::string text = header.dump();
  const uint64_t header_bytes = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&header_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const at::Tensor& t : ordered)
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  if (!out.flush()) throw std::runtime_error(path + ": cannot write");
}

}  // namespace meshplan::test
