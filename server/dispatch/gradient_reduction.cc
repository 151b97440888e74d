#include "server/dispatch/gradient_reduction.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/autodiff/tape.h"
#include "server/core/status.h"
#include "server/ops/attrs.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {

std::string Str(uint64_t v) { return absl::StrCat(v); }

}  // namespace

GradientReduction::GradientReduction(const Dispatcher& dispatcher, const CallEnv& env,
                                     const GradientReductionSpec& spec, uint64_t context_id,
                                     const std::function<absl::StatusOr<Tensor>(uint64_t)>& lookup)
    : dispatcher_(dispatcher), env_(env), op_(spec.op.empty() ? "mean" : spec.op) {
  env_.no_grad = true;
  buckets_.resize(spec.buckets.size());
  check_ = [&]() -> absl::Status {
    if (env_.group == nullptr) {
      return Error(Reason::kGroupNotJoined,
                   "backward: reducing gradients needs a process group; JoinGroup first",
                   {{"field", "reduce"}});
    }
    if (op_ != "mean" && op_ != "sum") {
      return Error(Reason::kInvalidRequest,
                   absl::StrCat("backward: gradients reduce by 'mean' or 'sum', not '", op_, "'"),
                   {{"field", "reduce.op"}, {"op", op_}});
    }
    std::set<uint64_t> seen;
    for (size_t b = 0; b < spec.buckets.size(); ++b) {
      const Metadata where = {{"field", "reduce.buckets"}, {"bucket_index", Str(b)}};
      if (spec.buckets[b].empty()) {
        return Error(Reason::kInvalidRequest,
                     absl::StrCat("backward: gradient bucket ", b, " names no leaf"), where);
      }
      Bucket& bucket = buckets_[b];
      for (uint64_t handle : spec.buckets[b]) {
        Metadata at = where;
        at["leaf"] = Str(handle);
        if (!seen.insert(handle).second) {
          return Error(Reason::kInvalidRequest,
                       absl::StrCat("backward: leaf ", handle, " is in two gradient buckets"), at);
        }
        auto leaf = lookup(handle);
        if (!leaf.ok()) return WithMetadata(leaf.status(), at);
        const auto& meta = leaf->autograd();
        if (meta == nullptr || meta->grad_fn != nullptr || meta->context_id != context_id ||
            !IsFloat(leaf->dtype())) {
          return Error(
              Reason::kBadOperand,
              absl::StrCat("backward: gradient bucket ", b, " names tensor ", handle,
                           ", which is not a requires-grad float leaf of context ", context_id),
              at);
        }
        const Tensor& first = bucket.leaves.empty() ? *leaf : bucket.leaves[0];
        if (leaf->dtype() != first.dtype() || leaf->device() != first.device()) {
          at["dtype"] = std::string(DTypeName(leaf->dtype()));
          at["device"] = leaf->device();
          return Error(
              Reason::kBadOperand,
              absl::StrCat("backward: gradient bucket ", b, " mixes ", DTypeName(first.dtype()),
                           " on ", first.device(), " with ", DTypeName(leaf->dtype()), " on ",
                           leaf->device(), "; a bucket is reduced as one tensor"),
              at);
        }
        where_.emplace_back(b, bucket.leaves.size());
        leaf_ids_.push_back(handle);
        bucket.leaves.push_back(*leaf);
      }
      bucket.grads.resize(bucket.leaves.size());
      bucket.told.resize(bucket.leaves.size());
      bucket.waiting = bucket.leaves.size();
    }
    return absl::OkStatus();
  }();
}

GradientReduction::~GradientReduction() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    has_work_ = true;
  }
  if (worker_.joinable()) worker_.join();
}

absl::Status GradientReduction::Begin(const BackwardPlan& plan) {
  RETURN_IF_ERROR(check_);  // no step runs for a request that cannot reduce
  overlap_ = std::none_of(plan.steps.begin(), plan.steps.end(), [](const BackwardPlan::Step& s) {
    return s.runs && s.op->collective != CollectiveKind::kNone;
  });
  return absl::OkStatus();
}

absl::Status GradientReduction::Final(uint64_t leaf_id, const Tensor& grad) {
  if (!check_.ok() || leaf_id == 0) return absl::OkStatus();
  const auto it = std::find(leaf_ids_.begin(), leaf_ids_.end(), leaf_id);
  if (it == leaf_ids_.end()) return absl::OkStatus();
  const auto [b, slot] = where_[it - leaf_ids_.begin()];
  Bucket& bucket = buckets_[b];
  if (bucket.told[slot] || bucket.waiting == 0) return absl::OkStatus();
  bucket.told[slot] = true;
  if (grad.defined()) bucket.grads[slot] = grad.Detached();
  --bucket.waiting;
  return LaunchReady();
}

absl::Status GradientReduction::LaunchReady() {
  while (!stopped_ && launched_ < buckets_.size() && buckets_[launched_].waiting == 0) {
    RETURN_IF_ERROR(Failure());
    absl::StatusOr<Tensor> flat = Flatten(buckets_[launched_]);
    if (!flat.ok()) {
      Refuse(flat.status());
      return flat.status();
    }
    Submit({launched_++, *std::move(flat), absl::OkStatus()});
  }
  return Failure();
}

void GradientReduction::Refuse(const absl::Status& why) {
  // Every rank fails at the bucket this rank refuses and stops there, so one refusal keeps
  // the group in step. A rank with no bucket left has nothing its peers wait for.
  if (stopped_ || env_.group == nullptr) return;
  stopped_ = true;
  if (launched_ < buckets_.size()) Submit({launched_++, Tensor(), why});
}

absl::StatusOr<Tensor> GradientReduction::Flatten(const Bucket& bucket) {
  DispatchRunner run(dispatcher_, env_);
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < bucket.leaves.size(); ++i) {
    const Tensor& leaf = bucket.leaves[i];
    Tensor g = bucket.grads[i];
    if (!g.defined()) {
      ASSIGN_OR_RETURN(g, run.Run1(opname::zeros, {},
                                   {{"shape", Shape{leaf.numel()}},
                                    {"dtype", std::string(DTypeName(leaf.dtype()))},
                                    {"device", leaf.device()}}));
    } else {
      if (g.dtype() != leaf.dtype()) {
        ASSIGN_OR_RETURN(
            g, run.Run1(opname::to_dtype, {g}, {{"dtype", std::string(DTypeName(leaf.dtype()))}}));
      }
      ASSIGN_OR_RETURN(g, run.Run1(opname::reshape, {g}, {{"shape", Shape{g.numel()}}}));
    }
    pieces.push_back(std::move(g));
  }
  if (pieces.size() == 1) return pieces[0];
  return run.Run1(opname::cat, std::move(pieces), {});
}

void GradientReduction::Submit(Job job) {
  if (!overlap_) {
    {
      absl::MutexLock lock(&mu_);
      ++submitted_;
      drained_ = false;
    }
    Run(std::move(job));
    return;
  }
  absl::MutexLock lock(&mu_);
  ++submitted_;
  drained_ = false;
  queue_.push_back(std::move(job));
  has_work_ = true;
  if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
}

void GradientReduction::Work() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&has_work_));
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.erase(queue_.begin());
      has_work_ = stop_ || !queue_.empty();
    }
    Run(std::move(job));
  }
}

void GradientReduction::Run(Job job) {
  // After a failed bucket every rank stops: each failed the same bucket.
  if (!Failure().ok()) return Done(absl::OkStatus());
  const Metadata where = {{"phase", "gradient_reduction"}, {"bucket_index", Str(job.bucket)}};
  const absl::StatusOr<const OpDef*> def = dispatcher_.registry().Find(opname::all_reduce);
  if (!def.ok()) return Done(def.status());
  CallEnv env = env_;
  env.collective_tag = absl::StrCat("gradient bucket ", job.bucket, " of ", buckets_.size());
  if (job.refusal.ok()) {
    auto out = dispatcher_.Call(**def, {job.flat}, {{"op", op_}}, env);
    if (!out.ok()) return Done(WithMetadata(out.status(), where));
    buckets_[job.bucket].reduced = (*out)[0];
    return Done(absl::OkStatus());
  }
  // The peers meet this rank's refusal and fail with it; so does this rank.
  auto attrs = ValidateAttrs(opname::all_reduce, (*def)->attrs, {{"op", op_}});
  if (!attrs.ok()) return Done(attrs.status());
  const std::vector<Tensor> none;
  std::vector<Tensor> outputs;
  const std::string& device = buckets_[job.bucket].leaves.empty()
                                  ? std::string(kHostDevice)
                                  : buckets_[job.bucket].leaves[0].device();
  const distributed::CollectiveCall call{
      **def, *attrs, none, outputs, device, job.refusal, env.collective_tag};
  (void)env_.group->Run(call);
  Done(WithMetadata(job.refusal, where));
}

void GradientReduction::Done(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (failed_.ok() && !status.ok()) failed_ = std::move(status);
  ++finished_;
  drained_ = finished_ == submitted_;
}

absl::Status GradientReduction::Failure() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status GradientReduction::End() {
  if (!check_.ok()) return check_;
  for (Bucket& bucket : buckets_) bucket.waiting = 0;
  absl::Status launched = LaunchReady();
  Wait();
  RETURN_IF_ERROR(launched);
  RETURN_IF_ERROR(Failure());
  // Split back here, while a failure still fails the backward before it frees its graph.
  DispatchRunner run(dispatcher_, env_);
  size_t next = 0;
  for (Bucket& bucket : buckets_) {
    int64_t start = 0;
    for (const Tensor& leaf : bucket.leaves) {
      Tensor g = bucket.reduced;
      if (bucket.leaves.size() > 1) {
        ASSIGN_OR_RETURN(
            g, run.Run1(opname::narrow, {g},
                        {{"dim", int64_t{0}}, {"start", start}, {"length", leaf.numel()}}));
      }
      start += leaf.numel();
      ASSIGN_OR_RETURN(g, run.Run1(opname::reshape, {g}, {{"shape", leaf.shape()}}));
      reduced_.emplace_back(leaf_ids_[next++], g.Detached());
    }
  }
  ended_ = true;
  return absl::OkStatus();
}

void GradientReduction::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&drained_));
}

absl::StatusOr<std::vector<std::pair<uint64_t, Tensor>>> GradientReduction::Finish(
    absl::Status backward) {
  if (!check_.ok()) {
    backward = check_;
  } else if (backward.ok() && !ended_) {
    backward = Error(Reason::kInternal, "backward: the gradient reduction was never ended",
                     {{"phase", "gradient_reduction"}});
  }
  if (!backward.ok() && Failure().ok()) Refuse(backward);
  Wait();
  RETURN_IF_ERROR(backward);
  RETURN_IF_ERROR(Failure());
  return std::move(reduced_);
}

}  // namespace tensord
