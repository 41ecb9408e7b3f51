// Helpers shared by the executor tests: tensor comparison with a readable failure message,
// and a tiny model spec that runs in milliseconds on CPU.
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "planner/model_spec.h"

namespace meshplan::test {

// |a - b| <= atol + rtol * |b| elementwise; on failure the message names the worst element.
inline void RequireClose(const at::Tensor& a, const at::Tensor& b, double rtol, double atol,
                         const std::string& what) {
  INFO(what);
  REQUIRE(a.sizes() == b.sizes());
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  const at::Tensor excess = (a64 - b64).abs() - (b64.abs() * rtol + atol);
  const double worst = excess.max().item<double>();
  if (worst > 0) {
    const int64_t i = excess.flatten().argmax().item<int64_t>();
    std::ostringstream msg;
    msg << what << ": element " << i << " got " << a64.flatten()[i].item<double>() << " want "
        << b64.flatten()[i].item<double>() << " (max |diff| "
        << (a64 - b64).abs().max().item<double>() << ")";
    FAIL(msg.str());
  }
  SUCCEED();
}

// V=32 E=16 L=2 H=4 K=2 (GQA) F=24: every code path, microseconds per op.
inline ModelSpec TinySpec(bool tied = false, int64_t kv_heads = 2) {
  ModelSpec m;
  m.name = "test-tiny";
  m.vocab_size = 32;
  m.hidden = 16;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.ffn_hidden = 24;
  m.tied_embeddings = tied;
  m.max_seq = 64;
  return m;
}

}  // namespace meshplan::test
