// Reading and writing safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, and
// "__metadata__": {string: string}}, then the raw little-endian bytes. Only what the
// outside-reference tests exchange with Python: F32 and I64 tensors on the CPU.
// Errors: std::runtime_error naming the file and what is wrong.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace meshplan::test {

struct SafetensorsFile {
  std::map<std::string, at::Tensor> tensors;         // contiguous CPU F32 / I64
  std::map<std::string, std::string> metadata;       // "__metadata__"
};

SafetensorsFile ReadSafetensors(const std::string& path);
// Writes atomically enough for a test (one write, then close); tensors are made contiguous
// CPU copies first; a dtype other than F32 / I64 throws.
void WriteSafetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace meshplan::test
