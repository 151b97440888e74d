// A planned call's memo on the CPU backend (backend.h's KernelMemo): the primitives and cache
// keys its kernel looked up, in the order it looked them up. While the call runs again inside
// its MemoScope, GetPrimitive and MemoKey (onednn_common.h) take each from its position in
// that sequence instead of building a key and searching the process's cache, when the entry
// there was made by the same call site (and a primitive passes the site's check). A kernel
// whose path depends on state (a workspace found or not) meets another site's entry where its
// path turns: the sequence is cut there and goes on with this run's keyed lookups.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>

namespace tensord::cpu::onednn {

struct CachedPrimitive;

class CallMemo {
 public:
  struct Entry {
    const char* site = nullptr;  // the call site's own string literal
    std::string key;             // MemoKey's; empty for a primitive
    std::shared_ptr<const CachedPrimitive> primitive;
  };
  // The entry at the current position when `site` made it; null otherwise.
  const Entry* Peek(const char* site) const {
    return next_ < entries_.size() && entries_[next_].site == site ? &entries_[next_] : nullptr;
  }
  void Advance() { ++next_; }
  // Drops the entries from the current position on, puts `entry` there and moves past it.
  void Replace(Entry entry);
  void Rewind() { next_ = 0; }
  size_t size() const { return entries_.size(); }

 private:
  std::deque<Entry> entries_;
  size_t next_ = 0;
};

// The memo the calling thread's kernel runs with (null: none, every lookup is keyed).
CallMemo* CurrentMemo();

// Makes `memo` (may be null) the calling thread's memo, from its first entry, for as long as
// the scope lives; restores the enclosing call's on its end.
class MemoScope {
 public:
  explicit MemoScope(CallMemo* memo);
  ~MemoScope();
  MemoScope(const MemoScope&) = delete;
  MemoScope& operator=(const MemoScope&) = delete;

 private:
  CallMemo* const outer_;
};

}  // namespace tensord::cpu::onednn
