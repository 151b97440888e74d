// Plain tensors bound to oneDNN primitives that choose their own (blocked) memory layouts, as
// the convolutions do: operands are reordered into the chosen layout before the call and
// results reordered back after it.
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {

// Copies `from` into `to`, converting the layout (a cached reorder primitive).
void Reorder(const dnnl::memory& from, const dnnl::memory& to);

// Binds the arguments of one execution of `p`. In() reorders an input when the primitive wants
// a layout other than the tensor's plain one, or reuses the copy an earlier primitive made of
// the same tensor, unchanged since (onednn_workspace_cache.h keeps them); Out() lets the
// primitive write a temporary in its layout that Run() reorders into the tensor afterwards.
// Temporaries and copies are pooled host memory.
class Binder {
 public:
  explicit Binder(const CachedPrimitive& p) : p_(p) {}

  void In(int arg, const Tensor& t, const dnnl::memory::desc& plain);
  void Out(int arg, Tensor& t, const dnnl::memory::desc& plain);
  void Run();

 private:
  const CachedPrimitive& p_;
  std::unordered_map<int, dnnl::memory> args_;
  std::deque<PooledMemory> temporaries_;
  std::vector<std::shared_ptr<const PooledMemory>> inputs_;  // reordered inputs
  std::vector<std::pair<dnnl::memory, dnnl::memory>> back_;  // (computed, destination)
};

}  // namespace tensord::cpu::onednn
