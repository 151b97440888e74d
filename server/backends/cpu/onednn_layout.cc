#include "server/backends/cpu/onednn_layout.h"

#include "server/backends/cpu/onednn_workspace_cache.h"

namespace tensord::cpu::onednn {

using dnnl::memory;

void Reorder(const memory& from, const memory& to) {
  const memory::desc src = from.get_desc(), dst = to.get_desc();
  // One kernel reorders several tensors, some only while a workspace is missing.
  auto prim = GetPrimitive(
      "reorder", [&] { return absl::StrCat("reorder|", DescKey(src), DescKey(dst)); },
      [&] {
        dnnl::reorder::primitive_desc pd(from, to, Attr());
        return CachedPrimitive{dnnl::reorder(pd), pd};
      },
      [&](const CachedPrimitive& p) { return p.pd.src_desc() == src && p.pd.dst_desc() == dst; });
  Execute(*prim, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

void Binder::In(int arg, const Tensor& t, const memory::desc& plain) {
  const memory::desc want = p_.pd.query_md(dnnl::query::exec_arg_md, arg);
  if (want == plain) {
    args_.emplace(arg, Wrap(t, plain));
    return;
  }
  // The copy made for an earlier primitive, while the tensor is unchanged: a convolution's
  // input again in its backward-weights pass, its weights in its backward-data pass, one
  // output gradient in both.
  const std::string key = MemoKey(
      "blocked", [&] { return absl::StrCat("blocked|", DescKey(plain), "|", DescKey(want)); });
  std::shared_ptr<const PooledMemory> copy = FindWorkspace(key, t);
  if (copy == nullptr) {
    auto fresh = std::make_shared<const PooledMemory>(want);
    Reorder(Wrap(t, plain), fresh->get());
    KeepWorkspace(key, t, fresh);
    copy = std::move(fresh);
  }
  args_.emplace(arg, copy->get());
  inputs_.push_back(std::move(copy));
}

void Binder::Out(int arg, Tensor& t, const memory::desc& plain) {
  const memory::desc want = p_.pd.query_md(dnnl::query::exec_arg_md, arg);
  if (want == plain) {
    args_.emplace(arg, Wrap(t, plain));
    return;
  }
  const memory& tmp = temporaries_.emplace_back(want).get();
  args_.emplace(arg, tmp);
  back_.emplace_back(tmp, Wrap(t, plain));
}

void Binder::Run() {
  Execute(p_, args_);
  for (const auto& [from, to] : back_) Reorder(from, to);
}

}  // namespace tensord::cpu::onednn
