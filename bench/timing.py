"""Timing and printing shared by the Python benches (compare.py, fusion.py)."""
import time


def best_of(fn, rounds: int, inner: int) -> float:
    """Seconds per call of fn: the best mean over `rounds` runs of `inner` calls."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def synced(run, sync, reps: int) -> float:
    """Seconds per call of run() over `reps` calls, after one warm-up; sync(last output) waits
    for the device (a GPU's queued work)."""
    sync(run())
    t0 = time.perf_counter()
    for _ in range(reps):
        out = run()
    sync(out)
    return (time.perf_counter() - t0) / reps


def interleaved(a, b, rounds: int, inner: int):
    """best_of for a and b, alternating rounds."""
    ta = tb = float("inf")
    for _ in range(rounds):
        ta = min(ta, best_of(a, 1, inner))
        tb = min(tb, best_of(b, 1, inner))
    return ta, tb


def line(what: str, ours: str, base: str, ratio, note: str = ""):
    shown = f"ratio {ratio:6.2f}" if ratio is not None else " " * 12
    print(f"{what:<38} {ours:>22}   {base:>26}   {shown}  {note}", flush=True)


def us(s: float) -> str:
    return f"{s * 1e6:.1f} µs"


def ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"
