// Gradients reduced across the session's process group while the backward that makes them
// runs, in buckets, as torch's DistributedDataParallel reduces them: a bucket's gradients are
// flattened into one tensor and all-reduced (mean or sum) as soon as the backward has finished
// every one of them, on a communication thread of the call, while the backward goes on with
// the layers before. Buckets are launched in the order given, a bucket once its gradients are
// final and every bucket before it has been launched, so every rank runs the same collectives
// in the same order; list them in the order the backward finishes them (the last layers
// first). A leaf that got no gradient on this rank takes part with zeros.
//
// A rank never fails alone: when its request is wrong or its backward fails, the next bucket
// it has not launched still meets its peers, as a refusal, so every rank of the group fails
// at that bucket with the same reason; after a failed bucket every rank stops, and the group
// stays in step. Each bucket's place ("gradient bucket 2 of 5") is agreed on with its
// attributes, so ranks whose buckets differ fail with COLLECTIVE_MISMATCH.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/autodiff/backward_plan.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {

// What a backward reduces: the leaves (handles of requires-grad leaves of the backward's
// context) per bucket, in launch order, and the reduction, "mean" or "sum".
struct GradientReductionSpec {
  std::string op = "mean";
  std::vector<std::vector<uint64_t>> buckets;
  bool empty() const { return buckets.empty(); }
};

class GradientReduction : public LeafGradientSink {
 public:
  // Checks `spec` against the session (`lookup` resolves a handle): GROUP_NOT_JOINED without a
  // group; INVALID_REQUEST for an op other than mean or sum, an empty bucket or a leaf named
  // twice; BAD_OPERAND for a leaf that is not a requires-grad float leaf of `context_id`, or
  // a bucket mixing dtypes or devices. A failed check is reported by Finish, after it has met
  // the peers.
  GradientReduction(const Dispatcher& dispatcher, const CallEnv& env,
                    const GradientReductionSpec& spec, uint64_t context_id,
                    const std::function<absl::StatusOr<Tensor>(uint64_t)>& lookup);
  ~GradientReduction() override;
  GradientReduction(const GradientReduction&) = delete;
  GradientReduction& operator=(const GradientReduction&) = delete;

  // The backward overlaps the reductions unless it runs collectives of its own: those run
  // in its order on the calling thread, and the buckets must keep their place among them.
  absl::Status Begin(const BackwardPlan& plan) override;
  absl::Status Final(uint64_t leaf_id, const Tensor& grad) override;
  // Launches what is left (a leaf the backward did not reach with zeros), waits for every
  // bucket and splits the results back: the backward fails, keeping its graph, when any of
  // it failed.
  absl::Status End() override;

  // After the backward, which ended with `backward`: after a failure, meets the peers with it
  // at the next bucket not launched yet and waits; otherwise gives the reduced gradient of
  // each bucket leaf, by leaf handle. The error of the check, the backward or the first
  // bucket that failed.
  absl::StatusOr<std::vector<std::pair<uint64_t, Tensor>>> Finish(absl::Status backward);

 private:
  struct Bucket {
    std::vector<Tensor> leaves;
    std::vector<Tensor> grads;  // per leaf, once final (undefined: none)
    std::vector<bool> told;     // per leaf: its gradient is final
    size_t waiting = 0;         // leaves whose gradient is not final yet
    Tensor reduced;             // the flat result
  };
  struct Job {
    size_t bucket = 0;
    Tensor flat;           // the bucket's gradients, flat; undefined for a refusal
    absl::Status refusal;  // what this rank tells its peers instead
  };

  // Launches, in order, every bucket whose gradients are all final.
  absl::Status LaunchReady();
  // The bucket's gradients as one flat tensor (zeros for a leaf without one).
  absl::StatusOr<Tensor> Flatten(const Bucket& bucket);
  void Submit(Job job);
  // Meets the peers with `why` at the next bucket (once), so every rank fails with it.
  void Refuse(const absl::Status& why);
  // Runs one bucket's all_reduce, or meets the peers with a refusal.
  void Run(Job job);
  void Done(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  void Work();
  // Until every submitted job has run.
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Failure() const ABSL_LOCKS_EXCLUDED(mu_);

  const Dispatcher& dispatcher_;
  CallEnv env_;  // no_grad
  std::string op_;
  absl::Status check_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // parallel to leaf_ids_: bucket, slot
  std::vector<uint64_t> leaf_ids_;
  size_t launched_ = 0;  // buckets launched or refused, in order
  bool overlap_ = true;
  bool ended_ = false;
  std::vector<std::pair<uint64_t, Tensor>> reduced_;  // per bucket leaf, once ended
  bool stopped_ = false;  // a refusal was submitted: nothing is launched after it

  mutable absl::Mutex mu_;
  std::vector<Job> queue_ ABSL_GUARDED_BY(mu_);
  size_t submitted_ ABSL_GUARDED_BY(mu_) = 0;  // jobs given to the worker or run
  size_t finished_ ABSL_GUARDED_BY(mu_) = 0;   // jobs done
  // What the waits wait for, kept as flags: absl::Condition reads a bool inside the library.
  bool drained_ ABSL_GUARDED_BY(mu_) = true;    // finished_ == submitted_
  bool has_work_ ABSL_GUARDED_BY(mu_) = false;  // stop_ or a queued job
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // the first bucket that failed
  std::thread worker_;
};

}  // namespace tensord
