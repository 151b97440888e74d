// The checks of streams on a device (server/core/stream_scope.h), for every runtime that runs
// streams on queues of their own: a stream reads while another stream's queue is held, a
// tensor read from another stream waits for its writer, a block freed under a pending reader
// is not written by the stream it is handed to before that reader ran, and an ended stream
// gives its queue back. A runtime's test holds a queue its own way (an OpenCL user event, a
// CUDA host function), so "does not wait" and "waits" are seen deterministically: work that
// wrongly waited for the held stream would never finish while it is held, and work that
// wrongly ran before it would read values it has not written yet.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace tensord::testing {

// The calling thread's queue, held until Release or destruction.
class HeldStream {
 public:
  virtual ~HeldStream() = default;
  virtual void Release() = 0;
};
// Holds the calling thread's queue.
using HoldCurrentStream = std::function<std::unique_ptr<HeldStream>()>;

// Each check runs on `device`. With `warm`, every op and size a check uses runs once before a
// stream is held, so that no kernel is loaded and no block allocated from the driver while it
// is (CUDA may synchronize those with every stream).
void CheckAStreamReadsWhileAnotherIsHeld(const std::string& device, const HoldCurrentStream& hold,
                                         bool warm);
void CheckATensorReadFromAnotherStreamWaitsForItsWriter(const std::string& device,
                                                        const HoldCurrentStream& hold, bool warm);
void CheckABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders(const std::string& device,
                                                                  const HoldCurrentStream& hold,
                                                                  bool warm);
// `queues`: how many queues the runtime holds for streams now.
void CheckAnEndedStreamGivesItsQueueBack(const std::string& device,
                                         const std::function<size_t()>& queues);

}  // namespace tensord::testing
