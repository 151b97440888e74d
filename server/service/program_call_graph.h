// What the fusion passes (program_fusion.h) know of a compiled program: its calls in run
// order, what reads each output, which outputs leave the program, what each operand binds,
// and which calls write tensors besides their outputs.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "server/dispatch/dispatcher.h"
#include "server/service/program.h"
#include "server/service/session.h"

namespace tensord {

struct CallUse {
  size_t call;
  size_t operand;
};

// A program's calls (forward, then updates) with what reads each output.
struct CallGraph {
  using Ref = std::pair<size_t, size_t>;  // (call, output)
  std::vector<CallSpec*> calls;
  size_t n_forward = 0;
  std::map<Ref, std::vector<CallUse>> uses;
  std::vector<bool> external;  // a root, kept, fetched or made a requires-grad leaf

  explicit CallGraph(ProgramSpec& spec);
  bool SameSection(size_t a, size_t b) const { return (a < n_forward) == (b < n_forward); }
  // The one call reading output 0 of `call`, or null when none or several do.
  const CallUse* OnlyUse(size_t call) const;
};

// What an operand binds, as compiled; nullopt for a number or an operand without a value.
std::optional<TensorMeta> OperandMeta(const OperandSpec& operand,
                                      const std::vector<std::vector<TensorMeta>>& metas,
                                      const std::vector<ParameterType>& parameters,
                                      Session& session, const std::string& device);

// A call that writes tensors other than its outputs: a fused call placed after it would read
// what it wrote where the calls it replaces read the value before.
bool Writes(const Dispatcher& dispatcher, const CallSpec& c);

}  // namespace tensord
