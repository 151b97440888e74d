#include "server/backends/cpu/onednn_layout.h"

namespace tensord::cpu::onednn {

using dnnl::memory;

void Reorder(const memory& from, const memory& to) {
  auto prim =
      GetPrimitive(absl::StrCat("reorder|", DescKey(from.get_desc()), DescKey(to.get_desc())), [&] {
        dnnl::reorder::primitive_desc pd(from, to, Attr());
        return CachedPrimitive{dnnl::reorder(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

void Binder::In(int arg, const Tensor& t, const memory::desc& plain) {
  const memory::desc want = p_.pd.query_md(dnnl::query::exec_arg_md, arg);
  if (want == plain) {
    args_.emplace(arg, Wrap(t, plain));
    return;
  }
  const memory& tmp = temporaries_.emplace_back(want).get();
  Reorder(Wrap(t, plain), tmp);
  args_.emplace(arg, tmp);
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
