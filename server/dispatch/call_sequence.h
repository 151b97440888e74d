// The calls a run makes by op name (a composite's parts, a backward rule's ops, the engine's
// sums and casts), each with its CallPlan, in the order the run makes them. A compiled program
// keeps one across its runs (CallEnv::sequence): the k-th call by name of a run finds the k-th
// entry, and when that entry was made for the same op and attributes, the call runs with the
// entry's plan — no registry lookup, no attribute validation, no shape rule, no kernel planning
// and, for a planned kernel, no primitive key (KernelMemo). A call that differs cuts the
// sequence there, and the rest of it is planned again as the run goes on. One run at a time.
#pragma once

#include <cstddef>
#include <deque>
#include <string>

#include "absl/strings/string_view.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {

class CallSequence {
 public:
  struct Entry {
    std::string op;  // as called
    const OpDef* def = nullptr;
    AttrMap attrs;
    CallPlan plan;
  };

  // The entry of the next call when it was made for `op` with `attrs`, moving past it; null
  // otherwise, with the entries from there on dropped (Add puts the call's own there).
  Entry* Next(absl::string_view op, const AttrMap& attrs) {
    if (next_ < entries_.size() && entries_[next_].op == op && entries_[next_].attrs == attrs) {
      return &entries_[next_++];
    }
    entries_.resize(next_);
    return nullptr;
  }
  // A new entry for the next call, moving past it. Entries stay where they are while later
  // ones come and go, so a call's entry outlives the calls nested in it.
  Entry* Add(const std::string& op, const OpDef& def, const AttrMap& attrs) {
    Entry& e = entries_.emplace_back();
    e.op = op;
    e.def = &def;
    e.attrs = attrs;
    ++next_;
    return &e;
  }
  // Before a run: its first call by name takes the first entry.
  void Rewind() { next_ = 0; }
  size_t size() const { return entries_.size(); }

 private:
  std::deque<Entry> entries_;
  size_t next_ = 0;
};

}  // namespace tensord
