#include "server/backends/cpu/onednn_call_memo.h"

#include <utility>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

thread_local CallMemo* current_memo = nullptr;

}  // namespace

void CallMemo::Replace(Entry entry) {
  entries_.resize(next_);
  entries_.push_back(std::move(entry));
  ++next_;
}

CallMemo* CurrentMemo() { return current_memo; }

MemoScope::MemoScope(CallMemo* memo) : outer_(current_memo) {
  if (memo != nullptr) memo->Rewind();
  current_memo = memo;
}

MemoScope::~MemoScope() { current_memo = outer_; }

std::shared_ptr<const CachedPrimitive> GetPrimitive(
    const char* site, absl::FunctionRef<std::string()> key,
    const std::function<CachedPrimitive()>& make,
    absl::FunctionRef<bool(const CachedPrimitive&)> fits) {
  CallMemo* memo = CurrentMemo();
  if (memo != nullptr) {
    const CallMemo::Entry* e = memo->Peek(site);
    if (e != nullptr && e->primitive != nullptr && fits(*e->primitive)) {
      memo->Advance();
      return e->primitive;
    }
  }
  std::shared_ptr<const CachedPrimitive> p = GetCachedPrimitive(key(), make);
  if (memo != nullptr) memo->Replace({site, {}, p});
  return p;
}

std::shared_ptr<const CachedPrimitive> GetPrimitive(const char* site,
                                                    absl::FunctionRef<std::string()> key,
                                                    const std::function<CachedPrimitive()>& make) {
  return GetPrimitive(site, key, make, [](const CachedPrimitive&) { return true; });
}

std::string MemoKey(const char* site, absl::FunctionRef<std::string()> key) {
  CallMemo* memo = CurrentMemo();
  if (memo != nullptr) {
    const CallMemo::Entry* e = memo->Peek(site);
    if (e != nullptr && e->primitive == nullptr) {
      memo->Advance();
      return e->key;
    }
  }
  std::string k = key();
  if (memo != nullptr) memo->Replace({site, k, nullptr});
  return k;
}

}  // namespace tensord::cpu::onednn
