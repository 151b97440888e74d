#!/usr/bin/python3
"""Drives a running tensord (the container under test) through the Python client.

Checks a backward pass against the analytic gradient, then provokes the two autodiff
failures the server exists to report and prints their reasons. Exits non-zero on any surprise.

    PYTHONPATH=client/python /usr/bin/python3 docker/smoke_client.py --address 127.0.0.1:50051

Against a server with TLS and bearer tokens, --tls-ca and --token connect as a user would; the
client then also checks that a call without the token is refused as UNAUTHENTICATED.
"""
import argparse
import sys

import grpc
import numpy as np

import tensord


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"smoke_client: FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def report(label: str, err: tensord.TensordError) -> None:
    meta = ", ".join(f"{k}={v}" for k, v in sorted(err.metadata.items()))
    print(f"  {label}: {err.code.name} {err.reason}\n    message: {err.message}\n"
          f"    metadata: {meta}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--tls-ca", help="CA certificate (PEM file) of a TLS server")
    parser.add_argument("--token", help="bearer token of a server started with --auth-tokens")
    args = parser.parse_args()
    security = {k: v for k, v in (("tls_ca", args.tls_ca), ("token", args.token)) if v}

    if args.token:
        print("no token: every Tensord call must be refused")
        try:
            with tensord.connect(args.address, timeout=30, tls_ca=args.tls_ca) as anonymous:
                anonymous.session().close()
            check(False, "a session was opened without the token")
        except tensord.Unauthenticated as e:
            report("Unauthenticated", e)
            check(e.code == grpc.StatusCode.UNAUTHENTICATED, f"code {e.code}")
            check(args.token not in str(e), "the error echoes the token")

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((8, 4)).astype(np.float32)
    w_np = rng.standard_normal((4, 2)).astype(np.float32)

    with tensord.connect(args.address, timeout=30, **security) as client, client.session() as sess:
        devices = [d["name"] for d in client.devices()]
        print(f"connected to {args.address}: devices {devices}")

        # Backward pass: d/dw mean((x @ w)^2) = 2 x^T (x @ w) / numel.
        ctx = sess.autodiff(checkpointing="none")
        w = sess.tensor(w_np, requires_grad=True, ctx=ctx)
        x = sess.tensor(x_np)
        y = x @ w
        loss = sess.op("mean", sess.op("square", y))
        grads = ctx.backward(loss)
        got = grads[w].numpy()
        want = 2.0 * x_np.T @ (x_np @ w_np) / (x_np @ w_np).size
        err = float(np.max(np.abs(got - want)))
        print(f"backward: loss={float(loss.numpy()):.6f} grad shape={got.shape} "
              f"max |grad - analytic| = {err:.2e}")
        check(got.shape == (4, 2) and err < 1e-4, f"gradient off by {err}")

        print("seed failure 1: assign into an autodiff tensor while recording")
        try:
            sess.op("assign", w, np.zeros((4, 2), np.float32))
            check(False, "assign outside no_grad was accepted")
        except tensord.OperationNotMarkedForAutodiff as e:
            report("OperationNotMarkedForAutodiff", e)
            check(e.code == grpc.StatusCode.FAILED_PRECONDITION, f"code {e.code}")
            check(e.reason == "OPERATION_NOT_MARKED_FOR_AUTODIFF", f"reason {e.reason}")
            check(e.metadata.get("op") == "assign", f"metadata {e.metadata}")

        # The same update is allowed under no_grad, as an optimizer step would do it.
        with sess.no_grad():
            sess.op("assign", w, w - 0.1 * grads[w])
        check(np.allclose(w.numpy(), w_np - 0.1 * got, atol=1e-6), "no_grad assign result")

        print("seed failure 2: an op on an autodiff tensor after its context closed")
        ctx.close()
        try:
            w * 2.0
            check(False, "op on a closed context's tensor was accepted")
        except tensord.AutodiffContextNotEnabled as e:
            report("AutodiffContextNotEnabled", e)
            check(e.code == grpc.StatusCode.FAILED_PRECONDITION, f"code {e.code}")
            check(e.reason == "AUTODIFF_CONTEXT_NOT_ENABLED", f"reason {e.reason}")
            check(e.metadata.get("context_state") == "closed", f"metadata {e.metadata}")

        # Neither failure disturbed the session: plain compute still works.
        z = (sess.tensor(np.arange(3.0)) * 2.0).numpy()
        check(np.array_equal(z, [0.0, 2.0, 4.0]), f"plain op after the failures gave {z}")
    print("smoke_client: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
