#!/usr/bin/python3
"""tensord beside its baselines, measured in one run; prints each figure, its baseline and the
ratio (never asserted: docs/performance.md records the figures and how they were taken).

    bench/compare.py                       # starts build/tensord (or $TENSORD_BIN) itself
    bench/compare.py --address HOST:PORT   # a running server
    bench/compare.py --quick               # fewer repetitions (a smoke run)
    bench/compare.py --device cuda:0 --only mlp --only cnn   # the training steps on a GPU
    bench/compare.py --device cuda:0 --only conv             # the convolutions on a GPU

Lines (tensord | baseline):
  small op        Execute of add([4], [4]) f32 from Python | KeepAlive on the same channel
                  (the cheapest unary call of the same server, through the same client code)
  batch by hand   N chained adds of [4] f32 in one Execute built once: per-op cost of the
                  round trip | the server's own time for it (its server-timing metadata)
  batch of N      the same built with sess.batch() each time: per-op cost | PyTorch eager
  two sessions    batches of 1000 adds (built once) from two sessions in two threads at
                  once: throughput | one session alone
  rpc             the small op, median call: one Execute with the value inline (fetch), the
                  small op line's call (a handle) and that call + .numpy() | rpc_sync of the
                  same add to a second process (torch.distributed.rpc, TensorPipe, world_size 2;
                  its default transports, and TCP only)
  program of N    the same chain compiled once (sess.compile), one RunProgram: per-op cost
                  of the round trip | the server's own time for it (the chain runs as
                  fused_elementwise calls of up to 64 adds)
  MLP step        784-256-10, batch 256, SGD: forward batch, Backward, one tensord.optim step
                  | local PyTorch, same thread count (with --device cuda:N, both on that GPU,
                  each step ending with a read of its loss so that its kernels are done)
  MLP program     the same step compiled (sess.compile): one RunProgram a step | local PyTorch
                  (the note gives the speed-up over the eager step)
  MLP update      the SGD update alone: fused sgd ops | the same update written as 12 assign /
                  arithmetic calls (what a client had to send before the optimizer ops)
  conv2d          forward, and forward + backward, of the shapes of docs/performance.md
                  (resident tensors, outputs dropped unfetched: the client releases them in
                  batches, as a user's dropped tensors are) | local PyTorch; with the
                  server's minor page faults per call after warm-up (a server this script
                  started: it reads /proc/PID/stat); with --device cuda:N, PyTorch on that
                  GPU and each call ending with a read of its output's sum on both sides
  conv block      conv -> relu -> max_pool2d -> sum, forward + backward | local PyTorch
  CNN step        conv-relu-pool x2 + linear, 3x32x32, batch 64, SGD | local PyTorch
  CNN program     the same step compiled | local PyTorch
  fusion          the MLP and CNN programs, a gated GELU block's training program ([256,512]:
                  gelu(x w + b) * g + x, a sigmoid gate, mean square; its pointwise trees fuse
                  in the recorded forward), and a residual conv block compiled for inference
                  ([32,32,32,32], two conv2d with bias and relu, the second with the block's
                  input added, then summed) | the same programs on a server started with
                  --fusion=off; trees of pointwise calls (an expression on [1024,1024], GELU
                  written out on a large and a small input, 64 chained adds of [4]), summed |
                  the same with --fusion=off, PyTorch eager's time in the note; the MLP and CNN
                  eager steps, the forward one sess.batch() whose products fuse with their bias
                  and relu | the same steps with --fusion=off
  checkpoint      the eager MLP and CNN steps in an autodiff context with BALANCED
                  checkpointing | NONE: median step time, and the bytes GetSessionInfo reports
                  between forward and Backward (the context's saved_bytes, the session's
                  memory_used_bytes and what of it the step frees); the server reports no peak
  nn MLP / CNN    the same two models written with tensord.nn + tensord.optim as a PyTorch
                  script (zero_grad, forward, loss.backward(), step): eager, and compiled
                  with tensord.compile | the same torch.nn script, local PyTorch
  nn Transformer  the same for a TransformerEncoder (d_model 64, 4 heads, 2 layers,
                  feed-forward 128, dropout 0, batch_first) + a linear head to 10, on
                  [16, 32, 64] f32, MSE loss, Adam | the same torch.nn script
  nn LSTM         the same for a 2-layer LSTM (32 -> 64, batch_first) over 24 steps of a
                  batch of 16, a linear head on the last step to 10, MSE loss, Adam | the
                  same torch.nn script; and each
                  eager step with one Execute per op (set_forward_batching(False)) | the
                  same step with a module call's forward in one Execute
  put/get         256 MiB f32 through the chunked streams (MiB/s) | a bare Python gRPC stream
  shm put/get     the same through a shared memory region (numpy copied in and out by the
                  client) | the streams; and with the bytes written and read in place
                  (put_at, get(copy=False)) | the streams
Each timing is the best of several interleaved rounds (tensord and baseline alternate), so a
noisy machine slows both sides alike; the rpc and checkpoint lines give the median call of
their interleaved rounds instead.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client" / "python"))
import tensord  # noqa: E402
from tensord._pb import ops_pb2, service_pb2  # noqa: E402
from models import (NN_LOSSES, cnn_data, cnn_loss, mlp_data, mlp_loss, nn_data,  # noqa: E402
                    nn_modules, nn_optimizer, nn_train_step)
from torch_rpc import TorchRpcPair, free_port, timed_calls  # noqa: E402
from timing import best_of, interleaved, line, ms, us  # noqa: E402
from fusion import batch_fusion_compare, fusion_compare, pointwise_compare  # noqa: E402


def small_op(client, sess, rounds, inner):
    a = sess.tensor(np.ones(4, np.float32))
    b = sess.tensor(np.ones(4, np.float32))
    t_op, t_bare = interleaved(lambda: sess.op("add", a, b), lambda: sess.keep_alive(),
                               rounds, inner)
    line("small op (Python)", us(t_op), us(t_bare) + " KeepAlive", t_op / t_bare,
         "goal <= 1.15")


def rpc_compare(sess, rounds, inner):
    """The small op against torch.distributed.rpc: rpc_sync of the same [4] f32 add to a
    second process on this machine, with TensorPipe's default transports and over TCP only.
    Rounds alternate (each rpc pair stopped while it is not measured); each figure is the
    median call."""
    a = sess.tensor(np.ones(4, np.float32))
    b = sess.tensor(np.ones(4, np.float32))
    # One Execute whose call asks for its output's value inline (OpCall.fetch), built once:
    # a value back in one round trip, as rpc_sync returns one. The server stores the output
    # anyway; its handles are released between rounds, untimed.
    call = ops_pb2.OpCall(op="add", fetch=True)
    call.inputs.add().handle = a.handle
    call.inputs.add().handle = b.handle
    request = service_pb2.ExecuteRequest(session_id=sess.id, calls=[call])
    handles = []

    def fetched():
        result = sess._call("Execute", request).results[0]
        handles.append(result.outputs[0].handle)
        return tensord.dtypes.tensor_data_to_array(result.values[0])

    assert fetched().tolist() == [2.0] * 4
    assert sess.op("add", a, b, fetch=True).numpy().tolist() == [2.0] * 4
    variants = {
        "fetched": fetched,                                    # one round trip, value back
        "op": lambda: sess.op("add", a, b),                    # the small op line: a handle
        "numpy": lambda: sess.op("add", a, b).numpy(),          # Execute + GetTensor
        # The client's fetch: one Execute; .numpy() reads the value that came with it.
        "op_fetch": lambda: sess.op("add", a, b, fetch=True).numpy(),
    }
    samples = {k: [] for k in [*variants, "default", "tcp"]}
    try:
        with TorchRpcPair("default") as default, TorchRpcPair("tcp") as tcp:
            for fn in variants.values():
                timed_calls(fn, inner)  # warm
            for _ in range(rounds):
                for k, fn in variants.items():
                    samples[k] += timed_calls(fn, inner)
                    sess.release(*handles)
                    handles.clear()
                samples["default"] += default.times(inner)
                samples["tcp"] += tcp.times(inner)
    except Exception as e:  # noqa: BLE001 (the line says why; the other lines still run)
        line("small op vs torch rpc_sync", "", "failed", None,
             f"{type(e).__name__}: {e}".splitlines()[0])
        return
    t_rpc, t_tcp = statistics.median(samples["default"]), statistics.median(samples["tcp"])
    for k, what in (("fetched", "small op vs rpc, value inline"),
                    ("op", "small op vs rpc, handle only"),
                    ("numpy", "small op vs rpc, op + .numpy()"),
                    ("op_fetch", "small op vs rpc, op(fetch=True).numpy()")):
        t = statistics.median(samples[k])
        faster = "tensord" if t < t_rpc else "rpc_sync"
        line(what, us(t), us(t_rpc) + " rpc_sync", t / t_rpc,
             f"tensord / rpc time (medians), {faster} faster; {t / t_tcp:.2f} against rpc_sync "
             f"over TCP only, {us(t_tcp)}")


def execute_by_hand(sess, n: int):
    """An ExecuteRequest of n chained adds built once, as a client that caches its request
    would send it; returns a function running it (and releasing its outputs, untimed)."""
    start = sess.tensor(np.ones(4, np.float32))
    calls = []
    for k in range(n):
        call = ops_pb2.OpCall(op="add")
        if k == 0:
            call.inputs.add().handle = start.handle
        else:
            call.inputs.add().call_output.call = k - 1
        call.inputs.add().scalar.f = 1.0
        calls.append(call)
    request = service_pb2.ExecuteRequest(session_id=sess.id, calls=calls)
    timing, server = [], []

    def run():
        t0 = time.perf_counter()
        resp = sess.client._call("Execute", request)
        timing.append(time.perf_counter() - t0)
        server.append(sess.client.last_server_time)
        handles = [o.handle for r in resp.results for o in r.outputs]
        sess.client._call("Release", service_pb2.ReleaseRequest(session_id=sess.id,
                                                               handles=handles))
    run.server = server
    return run, timing


def two_sessions(client, rounds, n=1000, k=10):
    """Throughput of two sessions' batches run side by side (one thread each, requests built
    once, as execute_by_hand) against one session's alone: the server's threads share the
    cores, no session waits for the other's lock."""
    import threading
    with client.session() as first, client.session() as second:
        runs = [execute_by_hand(first, n)[0], execute_by_hand(second, n)[0]]

        def loop(run):
            for _ in range(k):
                run()
        loop(runs[0])  # warm
        alone = best_of(lambda: loop(runs[0]), rounds, 1)

        def both():
            threads = [threading.Thread(target=loop, args=(run,)) for run in runs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        together = best_of(both, rounds, 1)
    ratio = 2 * alone / together
    line(f"two sessions side by side, {n} adds", f"{2 * k * n / together / 1e3:.0f} k ops/s",
         f"{k * n / alone / 1e3:.0f} k ops/s one session", ratio,
         "throughput of two / one (goal >= 1.7 on 2 cores)")


def batches(sess, rounds):
    x = torch.ones(4)
    for n in (10, 1000, 5000):
        run, timing = execute_by_hand(sess, n)
        for _ in range(rounds):
            run()
        t = min(timing)
        line(f"batch of {n} adds by hand, per op", us(t / n), f"server {us(min(run.server) / n)}",
             None, "one Execute, request built once, round trip | the server's own time "
             "(server-timing); goal per op <= 3 µs")
    for n in (10, 100, 1000, 10000):
        start = sess.tensor(np.ones(4, np.float32))

        def run():
            with sess.batch():
                h = start
                for _ in range(n):
                    h = h + 1.0
        t = best_of(run, rounds, 1)

        def eager():
            h = x
            for _ in range(n):
                h = h + 1.0
        t_torch = best_of(eager, rounds, 1)
        line(f"batch of {n} adds from Python, per op", us(t / n),
             us(t_torch / n) + " torch eager", (t_torch / n) / (t / n))
    for n in (10, 1000, 5000):
        def chain(h):
            for _ in range(n):
                h = h + 1.0
            return h

        program = sess.compile(chain, np.ones(4, np.float32))
        start = np.ones(4, np.float32)
        server = []

        def run():
            program(start)
            server.append(sess.client.last_server_time)
        t = best_of(run, rounds, 1)
        line(f"program of {n} adds, per op", us(t / n), f"server {us(min(server) / n)}", None,
             f"one RunProgram, output fetched, round trip | the server's own time; "
             f"{program.fused_calls} fused calls (--fusion=off: none); goal per op <= 1 µs")
        program.release()


def eager_and_program(sess, ctx, opt, name, eager_step, loss_of, inputs, torch_step, rounds,
                      inner, program_goal, pid=None):
    """The eager step and the same step compiled (loss_of, backward, opt.step), each beside
    torch_step; the program line also gives its speed-up over the eager step. With the
    server's pid, each line also gives the server's page faults per step once warm."""
    def faults(step) -> str:
        return "" if pid is None else "; " + faults_per_call(pid, step, 5).replace("call", "step")

    t_step, t_torch = interleaved(eager_step, torch_step, rounds, inner)
    line(f"{name} step (eager)", f"{1 / t_step:.1f} steps/s", f"{1 / t_torch:.1f} steps/s torch",
         t_torch / t_step, "goal >= 0.8" + faults(eager_step))

    def train_step(*batch):
        loss = loss_of(*batch)
        opt.step(ctx.backward(loss))
        return loss

    program = sess.compile(train_step, *inputs)
    t_prog, t_torch = interleaved(lambda: program(*inputs), torch_step, rounds, inner)
    line(f"{name} step (program)", f"{1 / t_prog:.1f} steps/s",
         f"{1 / t_torch:.1f} steps/s torch", t_torch / t_prog,
         f"goal >= {program_goal}; {t_step / t_prog:.2f}x the eager step"
         + faults(lambda: program(*inputs)))
    program.release()


def torch_device(sess) -> str:
    """Where the PyTorch baseline runs: the session's GPU for a cuda device, else the CPU."""
    return "cuda:" + sess.device.split(":")[1] if sess.device.startswith("cuda:") else "cpu"


def off_host(sess) -> bool:
    return sess.device != "cpu"


def mlp(sess, rounds, inner, threads):
    xn, yn, init = mlp_data()
    torch.set_num_threads(threads)
    dev = torch_device(sess)
    tparams = [torch.tensor(v, device=dev, requires_grad=True) for v in init]
    topt = torch.optim.SGD(tparams, lr=0.01, momentum=0.9)
    tx, ty = torch.tensor(xn, device=dev), torch.tensor(yn, device=dev)

    def torch_step():
        w1, b1, w2, b2 = tparams
        loss = torch.nn.functional.cross_entropy(torch.relu(tx @ w1 + b1) @ w2 + b2, ty)
        topt.zero_grad()
        loss.backward()
        topt.step()
        if dev != "cpu":
            loss.item()  # the step's kernels done

    with sess.autodiff() as ctx:
        params = [sess.tensor(v, requires_grad=True) for v in init]
        opt = tensord.optim.SGD(params, lr=0.01, momentum=0.9)
        x, y = sess.tensor(xn), sess.tensor(yn)
        bufs = [sess.op("zeros_like", p.detach()) for p in params]
        last = {}

        def loss_of(xb, yb):
            return mlp_loss(sess, params, xb, yb)

        def forward_backward():
            with sess.batch():
                loss = loss_of(x, y)
            last["grads"] = ctx.backward(loss)
            last["loss"] = loss

        def step():
            forward_backward()
            opt.step(last["grads"])
            if off_host(sess):
                last["loss"].numpy()  # the step's kernels done

        def fused_update():
            opt.step(last["grads"])

        def unfused_update():
            # momentum SGD as a client had to write it: buf = 0.9 buf + g; p = p - lr buf.
            g = last["grads"]
            with sess.no_grad(), sess.batch():
                for p, buf in zip(params, bufs):
                    sess.op("assign", buf, buf * 0.9 + g[p])
                    sess.op("assign", p, p - 0.01 * buf)

        eager_and_program(sess, ctx, opt, "MLP", step, loss_of, (x, y), torch_step, rounds, inner,
                          1.2)
        if off_host(sess):
            return  # the update line times host-side calls: the CPU's
        forward_backward()
        t_fused, t_unfused = interleaved(fused_update, unfused_update, rounds, inner)
        line("MLP update", ms(t_fused) + " fused sgd", ms(t_unfused) + " assign calls",
             t_unfused / t_fused, "(speed-up)")


def minor_faults(pid) -> int | None:
    """Minor page faults of process pid so far (None when unknown)."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[7])  # field 10, minflt


def faults_per_call(pid, fn, calls: int) -> str:
    before = minor_faults(pid)
    for _ in range(calls):
        fn()
    after = minor_faults(pid)
    return "faults n/a" if before is None else f"{(after - before) / calls:.0f} faults/call"


CONV_SHAPES = [((32, 32, 32, 32), (32, 32, 3, 3)), ((64, 64, 16, 16), (64, 64, 3, 3)),
               ((32, 3, 32, 32), (32, 3, 3, 3))]


def convolutions(sess, pid, rounds, inner, threads):
    """conv2d forward and forward + backward, then conv -> relu -> pool -> sum, against
    PyTorch, with the server's page faults per call once warm. With --device cuda:N, PyTorch
    on the same GPU, and each call on both sides ends with a read of its output's sum so that
    its kernels are done."""
    torch.set_num_threads(threads)
    rng = np.random.default_rng(2)
    F = torch.nn.functional
    dev, remote = torch_device(sess), off_host(sess)

    def done(t):  # tensord: a value read back ends the work a device queued
        if remote:
            sess.op("sum", t, fetch=True).item()

    def torch_done(t):
        if dev != "cpu":
            t.sum().item()

    for xs, ws in CONV_SHAPES:
        xn = rng.standard_normal(xs).astype(np.float32)
        wn = (rng.standard_normal(ws) * 0.1).astype(np.float32)
        x, w = sess.tensor(xn), sess.tensor(wn)
        tx, tw = torch.tensor(xn, device=dev), torch.tensor(wn, device=dev)
        with torch.no_grad():
            gyn = np.ones(F.conv2d(tx, tw, padding=1).shape, np.float32)
        gy, tgy = sess.tensor(gyn), torch.tensor(gyn, device=dev)

        def forward():  # the output is dropped: the client releases it with others
            done(sess.op("conv2d", x, w, padding=1))

        def torch_forward():
            with torch.no_grad():
                torch_done(F.conv2d(tx, tw, padding=1))

        name = "x".join(map(str, xs)) + " * " + "x".join(map(str, ws))
        forward()
        t, t_torch = interleaved(forward, torch_forward, rounds, inner)
        line(f"conv2d fwd {name}", ms(t), ms(t_torch) + " torch", t_torch / t,
             faults_per_call(pid, forward, 5) + "; goal >= 0.83, 0 faults")
        with sess.autodiff() as ctx:
            xg, wg = sess.tensor(xn, requires_grad=True), sess.tensor(wn, requires_grad=True)

            def both():
                grads = ctx.backward(sess.op("conv2d", xg, wg, padding=1), seed=gy)
                done(grads[wg])

            txg, twg = tx.clone().requires_grad_(), tw.clone().requires_grad_()

            def torch_both():
                F.conv2d(txg, twg, padding=1).backward(tgy)
                torch_done(twg.grad)
                txg.grad = twg.grad = None

            both()
            t, t_torch = interleaved(both, torch_both, rounds, inner)
            line(f"conv2d fwd+bwd {name}", ms(t), ms(t_torch) + " torch", t_torch / t,
                 faults_per_call(pid, both, 5) + "; goal >= 0.83, 0 faults")
    xn = rng.standard_normal((32, 32, 32, 32)).astype(np.float32)
    wn = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    txg = torch.tensor(xn, device=dev, requires_grad=True)
    twg = torch.tensor(wn, device=dev, requires_grad=True)

    def torch_block():
        loss = F.max_pool2d(F.relu(F.conv2d(txg, twg, padding=1)), 2).sum()
        loss.backward()
        torch_done(twg.grad)
        txg.grad = twg.grad = None

    with sess.autodiff() as ctx:
        xg, wg = sess.tensor(xn, requires_grad=True), sess.tensor(wn, requires_grad=True)

        def block():
            with sess.batch():
                loss = sess.op("sum", sess.op("max_pool2d", sess.op(
                    "relu", sess.op("conv2d", xg, wg, padding=1)), kernel_size=2))
            done(ctx.backward(loss)[wg])

        block()
        t, t_torch = interleaved(block, torch_block, rounds, inner)
        line("conv-relu-pool-sum fwd+bwd 32x32x32x32", ms(t), ms(t_torch) + " torch",
             t_torch / t, faults_per_call(pid, block, 5))


def cnn(sess, rounds, inner, threads, pid=None):
    xn, yn, init = cnn_data()
    torch.set_num_threads(threads)
    dev = torch_device(sess)
    tparams = [torch.tensor(v, device=dev, requires_grad=True) for v in init]
    topt = torch.optim.SGD(tparams, lr=0.01)
    tx, ty = torch.tensor(xn, device=dev), torch.tensor(yn, device=dev)
    F = torch.nn.functional

    def torch_step():
        c1, b1, c2, b2, w, b = tparams
        h = F.max_pool2d(F.relu(F.conv2d(tx, c1, b1, padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, c2, b2, padding=1)), 2)
        loss = F.cross_entropy(F.linear(h.flatten(1), w, b), ty)
        topt.zero_grad()
        loss.backward()
        topt.step()
        if dev != "cpu":
            loss.item()  # the step's kernels done

    with sess.autodiff() as ctx:
        params = [sess.tensor(v, requires_grad=True) for v in init]
        opt = tensord.optim.SGD(params, lr=0.01)
        x, y = sess.tensor(xn), sess.tensor(yn)

        def loss_of(xb, yb):
            return cnn_loss(sess, params, xb, yb)

        def step():
            with sess.batch():
                loss = loss_of(x, y)
            opt.step(ctx.backward(loss))
            if off_host(sess):
                loss.numpy()  # the step's kernels done

        eager_and_program(sess, ctx, opt, "CNN", step, loss_of, (x, y), torch_step, rounds, inner,
                          1.0, pid)


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def checkpoint_step(client, stack, policy: str, data, loss_fn, momentum: float):
    """A session of its own with one autodiff context (`policy`) holding the model of `data`
    and `loss_fn` (the MLP's or the CNN's above), SGD as there. Returns the eager step
    (forward batch, Backward, SGD step) and the bytes the server reports, once warm: after the
    forward, before Backward, the context's saved_bytes and the session's memory_used_bytes;
    and the session's memory_used_bytes after the step (nothing left on the tape)."""
    xn, yn, init = data()
    sess = stack.enter_context(client.session())
    ctx = stack.enter_context(sess.autodiff(checkpointing=policy))
    params = [sess.tensor(v, requires_grad=True) for v in init]
    opt = tensord.optim.SGD(params, lr=0.01, momentum=momentum)
    x, y = sess.tensor(xn), sess.tensor(yn)

    def forward():
        with sess.batch():
            return loss_fn(sess, params, x, y)

    def step():
        opt.step(ctx.backward(forward()))

    step()  # the optimizer's state
    loss = forward()
    saved, in_use = ctx.info().saved_bytes, sess.info().memory_used_bytes
    opt.step(ctx.backward(loss))
    del loss

    def train_step(xb, yb):
        loss = loss_fn(sess, params, xb, yb)
        opt.step(ctx.backward(loss))
        return loss
    program = sess.compile(train_step, x, y)  # its trial run measures the step's peak
    peak = program.peak_bytes
    program.release()
    return step, (saved, in_use, sess.info().memory_used_bytes, peak)


def checkpointing(client, rounds, inner):
    """BALANCED against NONE checkpointing on the eager MLP and CNN steps, each policy in a
    session of its own (its bytes in use are its alone), steps of the two alternating by
    round; each time is the median step. The server keeps no peak figure: the memory is what
    GetSessionInfo reports between forward and Backward (the context's saved_bytes, and the
    session's memory_used_bytes, all its live bytes then)."""
    import contextlib
    models = {"MLP": (mlp_data, mlp_loss, 0.9, inner),
              "CNN": (cnn_data, cnn_loss, 0.0, max(2, inner // 2))}
    for name, (data, loss_fn, momentum, n) in models.items():
        with contextlib.ExitStack() as stack:
            steps, memory = {}, {}
            for policy in ("none", "balanced"):
                steps[policy], memory[policy] = checkpoint_step(client, stack, policy, data,
                                                                loss_fn, momentum)
            samples = {policy: [] for policy in steps}
            for _ in range(rounds):
                for policy, step in steps.items():
                    samples[policy] += timed_calls(step, n)
        t_none, t_bal = (statistics.median(samples[p]) for p in ("none", "balanced"))
        (s_none, u_none, base_none, p_none), (s_bal, u_bal, base_bal, p_bal) = (
            memory["none"], memory["balanced"])
        goal = "goal >= 30 % less peak memory at <= 25 % more time"
        line(f"{name} step, BALANCED / NONE", ms(t_bal), ms(t_none) + " NONE", t_bal / t_none,
             f"time added {(t_bal / t_none - 1) * 100:+.1f} %; {goal}")
        line(f"{name} saved_bytes after forward", mib(s_bal), mib(s_none) + " NONE",
             s_bal / s_none if s_none else None,
             f"memory saved {(1 - s_bal / s_none) * 100 if s_none else 0:.1f} % "
             "(the context's tape)")
        line(f"{name} session bytes in use after fwd", mib(u_bal), mib(u_none) + " NONE",
             u_bal / u_none if u_none else None,
             f"memory saved {(1 - u_bal / u_none) * 100 if u_none else 0:.1f} % (all live bytes)")
        h_bal, h_none = u_bal - base_bal, u_none - base_none
        line(f"{name} held for backward", mib(h_bal), mib(h_none) + " NONE",
             h_bal / h_none if h_none > 0 else None,
             f"memory saved {(1 - h_bal / h_none) * 100 if h_none > 0 else 0:.1f} % (bytes in use "
             f"after fwd less after the step: {mib(base_bal)} / {mib(base_none)})")
        line(f"{name} step's peak (server)", mib(p_bal), mib(p_none) + " NONE",
             p_bal / p_none if p_none > 0 else None,
             f"memory saved {(1 - p_bal / p_none) * 100 if p_none > 0 else 0:.1f} % (the step as "
             "a program: its trial run's peak above the session's bytes, backward included)")


def nn_models(sess, rounds, inner, threads):
    """The MLP and the CNN above, and a small transformer encoder, written with tensord.nn +
    tensord.optim as a PyTorch script is (zero_grad, forward, loss.backward(), step), eager and
    with tensord.compile, each beside the same torch.nn script."""
    torch.set_num_threads(threads)
    data = nn_data()
    torch.manual_seed(0)
    tmodels = nn_modules(torch.nn)
    with tensord.default_session(sess):
        dmodels = nn_modules(tensord.nn)
        for name, tmodel in tmodels.items():
            dmodel = dmodels[name]
            dmodel.load_state_dict(tmodel.state_dict())
            xn, yn = data[name]
            n_inner = inner if name == "MLP" else max(2, inner // 4)

            tstep = nn_train_step(
                tmodel, nn_optimizer(torch.optim, name, tmodel.parameters()),
                getattr(torch.nn, NN_LOSSES[name])())
            tx, ty = torch.tensor(xn), torch.tensor(yn)
            opt = nn_optimizer(tensord.optim, name, dmodel.parameters())
            dstep = nn_train_step(dmodel, opt, getattr(tensord.nn, NN_LOSSES[name])())
            x, y = sess.tensor(xn), sess.tensor(yn)
            t_eager, t_torch = interleaved(lambda: dstep(x, y), lambda: tstep(tx, ty), rounds,
                                           n_inner)
            line(f"nn {name} step (eager)", f"{1 / t_eager:.1f} steps/s",
                 f"{1 / t_torch:.1f} steps/s torch", t_torch / t_eager,
                 "tensord.nn, a module call's forward in one Execute")

            def one_op_at_a_time(step=dstep, x=x, y=y):
                previous = tensord.nn.set_forward_batching(False)
                try:
                    step(x, y)
                finally:
                    tensord.nn.set_forward_batching(previous)

            t_single, t_batched = interleaved(one_op_at_a_time, lambda: dstep(x, y), rounds,
                                              n_inner)
            line(f"nn {name} step (eager, one op at a time)", f"{1 / t_single:.1f} steps/s",
                 f"{1 / t_batched:.1f} steps/s forward batched", t_batched / t_single,
                 "tensord.nn.set_forward_batching(False)")
            compiled = tensord.compile(dstep)
            try:
                compiled(x, y)  # the trace
            except Exception as e:  # noqa: BLE001 (the line says why, the other lines still run)
                line(f"nn {name} step (tensord.compile)", "failed", "", None,
                     f"{type(e).__name__}: {e}".splitlines()[0])
                compiled.reset()
                continue
            t_comp, t_torch = interleaved(lambda: compiled(x, y), lambda: tstep(tx, ty), rounds,
                                          n_inner)
            line(f"nn {name} step (tensord.compile)", f"{1 / t_comp:.1f} steps/s",
                 f"{1 / t_torch:.1f} steps/s torch", t_torch / t_comp,
                 f"{t_eager / t_comp:.2f}x the eager step")
            compiled.reset()


def bare_stream_seconds(rounds, mib) -> float:
    """The baseline of the streams: a bare Python gRPC server in this process sending `mib`
    messages of 1 MiB to a bare Python client (no tensord code on either side)."""
    from concurrent import futures

    import grpc
    chunk = bytes(1 << 20)
    identity = lambda b: b  # noqa: E731

    def stream(request, context):
        for _ in range(mib):
            yield chunk
    handler = grpc.method_handlers_generic_handler("bare.Stream", {
        "Get": grpc.unary_stream_rpc_method_handler(stream, request_deserializer=identity,
                                                    response_serializer=identity)})
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            get = channel.unary_stream("/bare.Stream/Get", request_serializer=identity,
                                       response_deserializer=identity)
            return best_of(lambda: sum(len(m) for m in get(b"")), rounds, 1)
    finally:
        server.stop(0)


def transfers(sess, rounds, mib):
    data = np.ones((mib << 20) // 4, np.float32)
    t_put = best_of(lambda: sess.tensor(data).release(), rounds, 1)
    t = sess.tensor(data)
    t_get = best_of(lambda: t.numpy(), rounds, 1)
    t_bare = bare_stream_seconds(rounds, mib)
    line(f"put / get {mib} MiB", f"{mib / t_put:.0f} / {mib / t_get:.0f} MiB/s",
         f"{mib / t_bare:.0f} MiB/s bare stream", None,
         f"{t_bare / t_put:.2f}x / {t_bare / t_get:.2f}x the bare Python stream (goal >= 0.9x, "
         ">= 1024 MiB/s)")
    try:
        shm = sess.shared_memory(data.nbytes)
    except tensord.SharedMemoryUnavailable as e:
        print(f"shared memory: not served ({e.metadata.get('cause')}): start the server with "
              "--shared-memory on this host")
        return
    with shm:
        s_put = best_of(lambda: shm.put(data).release(), rounds, 1)
        s_get = best_of(lambda: shm.get(t), rounds, 1)
        shm.array(np.float32, data.shape)[...] = data
        z_put = best_of(lambda: shm.put_at(np.float32, data.shape).release(), rounds, 1)
        z_get = best_of(lambda: shm.get(t, copy=False), rounds, 1)
    for what, put_s, get_s in (("shm put / get", s_put, s_get),
                               ("shm in place put / get", z_put, z_get)):
        line(f"{what} {mib} MiB", f"{mib / put_s:.0f} / {mib / get_s:.0f} MiB/s",
             f"streams {mib / t_put:.0f} / {mib / t_get:.0f} MiB/s",
             None, f"{t_put / put_s:.1f}x / {t_get / get_s:.1f}x the streams (goal >= 5x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="PyTorch's intra-op threads (the server uses every core)")
    sections = ["ops", "rpc", "mlp", "conv", "cnn", "fusion", "checkpoint", "nn", "transfers"]
    parser.add_argument("--only", choices=sections, action="append",
                        help="run only these sections (repeatable)")
    parser.add_argument("--device", default="cpu",
                        help="the session's device (mlp, conv and cnn only); PyTorch runs on the "
                        "same GPU for cuda:N, on the CPU otherwise")
    args = parser.parse_args()
    only = set(args.only or sections)
    rounds, inner = (2, 3) if args.quick else (5, 20)
    proc = None
    address = args.address
    if address is None:
        binary = os.environ.get("TENSORD_BIN", str(ROOT / "build" / "tensord"))
        address = f"127.0.0.1:{free_port()}"
        # Warnings only: the per-call info log line is not what is being measured.
        proc = subprocess.Popen([binary, f"--address={address}", "--log_level=warning",
                                 "--shared-memory", "--shared-memory-key-prefix=/tensord-"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    unfused_proc = unfused_address = None
    if proc is not None and "fusion" in only:
        unfused_address = f"127.0.0.1:{free_port()}"
        unfused_proc = subprocess.Popen([binary, f"--address={unfused_address}",
                                         "--log_level=warning", "--fusion=off"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with tensord.connect(address) as client:
            client.wait_ready()
            print(f"tensord {address}, torch {torch.__version__}, {args.threads} threads"
                  + (f", device {args.device}" if args.device != "cpu" else ""), flush=True)
            if args.device != "cpu" and only - {"mlp", "cnn", "conv"}:
                parser.error("--device applies to the mlp, conv and cnn sections only")
            with client.session(device=args.device) as sess:
                if "ops" in only:
                    small_op(client, sess, rounds, inner * 10)
                    batches(sess, rounds)
                    two_sessions(client, rounds)
                if "rpc" in only:
                    rpc_compare(sess, rounds, inner * 10)
                if "mlp" in only:
                    mlp(sess, rounds, inner, args.threads)
                if "conv" in only:
                    convolutions(sess, proc.pid if proc is not None else None, rounds,
                                 max(2, inner // 4), args.threads)
                if "cnn" in only:
                    cnn(sess, rounds, max(2, inner // 4), args.threads,
                        proc.pid if proc is not None else None)
                if "fusion" in only:
                    if unfused_address is None:
                        print("fusion: skipped (needs a server this script starts)")
                    else:
                        with tensord.connect(unfused_address) as unfused:
                            unfused.wait_ready()
                            fusion_compare(client, unfused, rounds, max(2, inner // 4))
                            batch_fusion_compare(client, unfused, rounds, max(2, inner // 4))
                            pointwise_compare(client, unfused, rounds, inner)
                if "checkpoint" in only:
                    checkpointing(client, rounds, inner)
                if "nn" in only:
                    nn_models(sess, rounds, inner, args.threads)
                if "transfers" in only:
                    transfers(sess, 2 if args.quick else 3, 64 if args.quick else 256)
    finally:
        for p in (proc, unfused_proc):
            if p is not None:
                p.terminate()
                p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
