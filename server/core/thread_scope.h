// A value the calling thread carries for the length of a scope: what a call sets for the code
// below it without passing it through every signature (a session's stream, its matmul
// precision). Each instantiation is one thread-local slot; outside any scope it holds
// `kOutside`.
#pragma once

namespace tensord {

// Sets the calling thread's value until destroyed (then the one before is restored). A moved
// scope restores nothing; the one it moved into does.
template <typename T, T kOutside>
class ThreadScope {
 public:
  explicit ThreadScope(T value) : previous_(Slot()) { Slot() = value; }
  ThreadScope(ThreadScope&& other) noexcept : previous_(other.previous_), active_(other.active_) {
    other.active_ = false;
  }
  ThreadScope& operator=(ThreadScope&&) = delete;
  ThreadScope(const ThreadScope&) = delete;
  ~ThreadScope() {
    if (active_) Slot() = previous_;
  }

  // The calling thread's value: kOutside outside any scope.
  static T Current() { return Slot(); }

 private:
  static T& Slot() {
    thread_local T value = kOutside;
    return value;
  }

  T previous_;
  bool active_ = true;
};

}  // namespace tensord
