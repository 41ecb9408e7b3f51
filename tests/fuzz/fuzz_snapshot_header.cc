// Fuzz target: a snapshot rank file (executor/snapshot_format.h) as `meshplan run --resume`
// reads it: the header's form, then the whole file verified against the identity it claims
// (size, checksum, finite values), and the same bytes as a `latest` pointer. No LibTorch.
#include "executor/snapshot_format.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return meshplan::fuzz::RunOnText(data, size, [](const std::string& bytes) {
    const std::string path = "fuzz/step_00000001/rank_00000.bin";
    try {
      meshplan::ParseLatestPointer(bytes, "fuzz/latest");
    } catch (const meshplan::InputError&) {
    }
    const meshplan::SnapshotHeader header = meshplan::ParseSnapshotHeader(bytes, path);
    meshplan::VerifySnapshotBytes(bytes, header.identity, path);
  });
}
