// Fuzz target: a framework's log (what `meshplan compare --log` reads) through every parser of
// planner/measure/framework_log/ in turn: Megatron-LM, torchtitan, DeepSpeed, the PyTorch hook.
#include "planner/measure/framework_log/framework_log.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const meshplan::RunShape shape{32, 4096, 8};
  for (auto parse : {meshplan::ParseMegatronLog, meshplan::ParseTorchtitanLog,
                     meshplan::ParseDeepspeedLog, meshplan::ParsePytorchHook})
    meshplan::fuzz::RunOnText(data, size, [&](const std::string& text) {
      parse(text, "fuzz/framework.log", shape);
    });
  return 0;
}
