// ThreadSanitizer builds only (TENSORD_SANITIZE=thread; CMakeLists.txt compiles this file into
// every executable that links tensord_core).
//
// Debian's abseil is not built with -fsanitize=thread, so absl::Mutex (a futex and atomics
// inside libabsl_synchronization.so) is invisible to TSan: without help, every access to
// session state guarded by an absl::Mutex would be reported as a race. These definitions
// take the place of the library's Mutex entry points for tensord's own calls, tell TSan about
// the lock operation (the __tsan_mutex_* annotation API, which also gives lock-order checks),
// and forward to the library's implementation found with dlsym(RTLD_NEXT).
//
// They are hidden: the executable must not export them, or gRPC's calls into absl::Mutex would
// bind here too, and gRPC also waits on absl::CondVar, which releases the mutex inside the
// library where no annotation can see it (TSan would then report double locks in gRPC).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#define TENSORD_TSAN_HIDDEN __attribute__((visibility("hidden")))
#define TENSORD_STR2(x) #x
#define TENSORD_STR(x) TENSORD_STR2(x)

namespace {

// The library's symbol: _ZN4absl<len><inline namespace>5Mutex<member>.
void* Real(const char* member) {
  const std::string ns = TENSORD_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      "_ZN4absl" + std::to_string(ns.size()) + ns + "5Mutex" + std::string(member);
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found in abseil\n", name.c_str());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealFn(const char* member) {
  return reinterpret_cast<Fn>(Real(member));
}

using Plain = void (*)(absl::Mutex*);
using Try = bool (*)(absl::Mutex*);
using Cond = void (*)(absl::Mutex*, const absl::Condition&);
using CondTimeout = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);

// An Await releases and re-acquires the mutex inside the library; to TSan it is an unlock
// followed by a lock, so what other threads did meanwhile under the mutex is ordered first.
void AnnotateRelease(void* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
}
void AnnotateAcquire(void* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

}  // namespace

TENSORD_TSAN_HIDDEN void absl::Mutex::Lock() {
  static const Plain real = RealFn<Plain>("4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

TENSORD_TSAN_HIDDEN void absl::Mutex::Unlock() {
  static const Plain real = RealFn<Plain>("6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

TENSORD_TSAN_HIDDEN bool absl::Mutex::TryLock() {
  static const Try real = RealFn<Try>("7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

TENSORD_TSAN_HIDDEN void absl::Mutex::ReaderLock() {
  static const Plain real = RealFn<Plain>("10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

TENSORD_TSAN_HIDDEN void absl::Mutex::ReaderUnlock() {
  static const Plain real = RealFn<Plain>("12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

TENSORD_TSAN_HIDDEN void absl::Mutex::Await(const Condition& cond) {
  static const Cond real = RealFn<Cond>("5AwaitERKNS0_9ConditionE");
  AnnotateRelease(this);
  real(this, cond);
  AnnotateAcquire(this);
}

TENSORD_TSAN_HIDDEN bool absl::Mutex::AwaitWithTimeout(const Condition& cond,
                                                       absl::Duration timeout) {
  static const CondTimeout real =
      RealFn<CondTimeout>("16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotateRelease(this);
  const bool met = real(this, cond, timeout);
  AnnotateAcquire(this);
  return met;
}

TENSORD_TSAN_HIDDEN void absl::Mutex::LockWhen(const Condition& cond) {
  static const Cond real = RealFn<Cond>("8LockWhenERKNS0_9ConditionE");
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}
