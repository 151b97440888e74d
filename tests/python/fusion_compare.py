"""What the fusion tests share: random inputs, and one program compiled and run on this
server and on the --fusion=off server of the `unfused` fixture (conftest.py)."""
import numpy as np


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def run_both(client, unfused, build, inputs, device=None):
    """`build(sess, *inputs)` compiled on both servers (no autodiff; in sessions on `device`,
    the server's default when None) and run once: per server (fused calls, fused ops,
    results)."""
    out = []
    for c in (client, unfused):
        with c.session(device=device) as sess:
            program = sess.compile(lambda *xs: build(sess, *xs), *inputs)
            out.append((program.fused_calls, list(program.fused_ops), program(*inputs)))
    return out
