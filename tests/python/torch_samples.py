"""PyTorch's own per-op sample inputs (OpInfo `sample_inputs` of
torch.testing._internal.common_methods_invocations.op_db) as a conformance source.

For every op the server lists that has an OpInfo of the same name (`nn.functional.` dropped:
OpInfo "nn.functional.conv2d" is tensord's "conv2d"), each OpInfo variant whose semantics are
the server op's (VARIANTS_EXCLUDED says which are left out and why) yields samples in float64
and float32. A sample is SampleInput(input, args, kwargs), called by PyTorch as
`op.op(input, *args, **kwargs)`; it is translated into one server call, run forward, then
backward with a random seed, and compared with PyTorch.

Translation (the rules a PyTorch-compatible client would follow):
  * The sample's arguments are bound to PyTorch's parameter names: positional ones through
    the op's PyTorch signature (SIGNATURES; default: the server's input names, then its
    attribute names, in ListOps order), keywords by their own names.
  * A parameter named like one of the server's inputs is an operand: a tensor is uploaded
    (float tensors PyTorch marks requires_grad become autodiff leaves), a Python number
    travels as a scalar operand, a list of tensors fills a variadic input (cat, einsum), None
    leaves an optional input out (only trailing ones can be left out: operands are
    positional).
  * Every other parameter is sent as an attribute under PyTorch's name, unrenamed, so a name
    the server spells differently is refused by the server (and listed below). None means
    "absent"; tuples become lists; torch dtypes become "f32"/"f64"/...; `device="cpu"` is
    dropped (a session has its device) and `requires_grad=` of creation ops becomes the call's
    requires_grad.
  * None inside a list travels only where the client encodes it (NONE_IN_LIST: the adaptive
    pools' output_size=(None, 7), sent as -1, "keep that dim's input size").
  * Cannot translate: a tensor where the server takes an attribute (clamp's tensor min), None
    inside any other list, a dtype the runner does not translate (uint8), a positional argument
    beyond the known signature, an optional input left out before a given one.

Reference (CPU-independent, as in opcheck.py): PyTorch evaluates the sample in float64 on
the same values (float32 tensors widened exactly, dtype= arguments float32 -> float64), and
the result is rounded once to the dtype of PyTorch's own typed call (float32 for a float32
sample). Torch's float32 kernels are never the reference: their last bits depend on the CPU.
Gradients: torch.autograd.grad of the float64 outputs with the same random seed, rounded
once to the leaf's dtype.

Tolerances (|got - want| <= atol + rtol * |want|, NaN == NaN, ints/bools exact):
  f64: rtol 1e-7, atol 1e-10.
  f32: rtol 1e-4, atol 1e-5: about 800 ulp (eps32 = 1.2e-7) of the exactly rounded value, the
       margin an elementwise kernel needs and some.
  Ops that accumulate (REDUCING: matmul-like, conv, pools, interpolation, reductions, norms,
  softmax, losses and their gradients) add the rounding error of a sum of n terms of size up
  to m^2 (products of inputs up to m): atol = max(atol, eps * sqrt(n) * m^2), with n the
  largest input numel (a bound on the reduction length), m = max(1, max |input|) and eps of
  the sample's dtype (sqrt(n): rounding errors of a long sum add up like a random walk; the
  worst case n would hide real errors). The samples are small (n <= a few hundred, |x| <= 9),
  so this is ~1e-4 in f32 and stays below 1e-10 in f64; rtol is unchanged.

An OpInfo with neither float dtype (bitwise_*, one_hot) runs its int64 samples instead (exact
comparison, no gradients).

Sample selection, to keep the file's run time in bounds: at most MAX_SAMPLES per OpInfo
entry, spread evenly over its sample list (max_pool2d has 1440 samples, mostly one form
repeated); samples whose tensors hold more than MAX_ELEMENTS elements are skipped.

Outcomes of a sample: "pass", "mismatch" (values, shapes, dtypes, output count or
gradients), "refused" (a TensordError: its reason and message are recorded) and
"untranslatable" (with why). Every outcome other than "pass" must match an entry of KNOWN
(torch_samples_known.py)
(op, sample form, outcome, the server's error reason), which says why it differs:
BUG (a server bug to fix), PYTORCH_FORM (a PyTorch form tensord should serve: a name, an
argument kind) or STRICT (tensord is deliberately stricter). An entry that no longer occurs
fails too, as does a sample of an entry's form that passes now, so the list stays exact.
Where tensord serves the same thing under another spelling, the entry carries a rewrite: the
sample is run again in tensord's spelling and must pass, so its numbers are still checked.
`python3 tests/python/torch_samples.py` runs everything against a fresh server and prints the
outcomes, the counts and the KNOWN table.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import types
import unittest
import zlib
from typing import Optional

import numpy as np
import torch

if __name__ == "__main__":  # run as a script: the client package, as conftest.py adds it
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))
import tensord  # noqa: E402
from torch_samples_known import KNOWN, check, known_table  # noqa: E402

DTYPES = {"f64": torch.float64, "f32": torch.float32, "i64": torch.int64}
# An OpInfo that has neither float dtype (bitwise_*, one_hot) runs its int64 samples instead.
INT_FALLBACK = ("i64",)
TOL = {"f64": (1e-7, 1e-10), "f32": (1e-4, 1e-5), "i64": (0.0, 0.0)}
EPS = {"f64": float(np.finfo(np.float64).eps), "f32": float(np.finfo(np.float32).eps),
       "i64": 0.0}
MAX_SAMPLES = 12
MAX_ELEMENTS = 20000
SAMPLE_LIMIT = 2000  # samples materialized per OpInfo before choosing MAX_SAMPLES
PREFIXES = ("nn.functional.",)

# OpInfo variants left out: (server op, variant_test_name) -> why.
VARIANTS_EXCLUDED = {
    ("batch_norm", "without_cudnn"): "the default variant's samples again (cuDNN is CUDA only)",
    ("silu", "complex"): "complex dtypes only",
}

# (op, attribute) whose lists may hold None: the client sends it as -1 (keep the input's size).
NONE_IN_LIST = {("adaptive_avg_pool2d", "output_size"), ("adaptive_max_pool2d", "output_size")}

# Ops that accumulate: f32 tolerance grows with the reduction length (see the module doc).
REDUCING = {
    "addmm", "baddbmm", "bmm", "dot", "matmul", "mm", "outer", "linear", "einsum", "trace",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d", "interpolate",
    "sum", "mean", "prod", "cumsum", "cumprod", "std", "var", "norm", "logsumexp",
    "softmax", "log_softmax", "softmin", "cosine_similarity",
    "layer_norm", "group_norm", "batch_norm",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss",
    "kl_div", "l1_loss", "mse_loss", "huber_loss", "smooth_l1_loss", "index_add",
    "scatter_add", "embedding",
}

# PyTorch's positional parameters of op.op(input, *args), first = the sample's input. Names
# of tensor inputs are the server's (operands are positional on the wire); every other name
# is PyTorch's.
LOSS3 = ("size_average", "reduce", "reduction")
SIGNATURES = {
    "adaptive_avg_pool2d": ("input", "output_size"),
    "adaptive_max_pool2d": ("input", "output_size", "return_indices"),
    "avg_pool1d": ("input", "kernel_size", "stride", "padding", "ceil_mode",
                   "count_include_pad"),
    "avg_pool2d": ("input", "kernel_size", "stride", "padding", "ceil_mode",
                   "count_include_pad", "divisor_override"),
    "max_pool1d": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                   "return_indices"),
    "max_pool2d": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                   "return_indices"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias", "training",
                   "momentum", "eps"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "binary_cross_entropy": ("input", "target", "weight") + LOSS3,
    "binary_cross_entropy_with_logits": ("input", "target", "weight") + LOSS3 + ("pos_weight",),
    "cross_entropy": ("input", "target", "weight", "size_average", "ignore_index", "reduce",
                      "reduction", "label_smoothing"),
    "nll_loss": ("input", "target", "weight", "size_average", "ignore_index", "reduce",
                 "reduction"),
    "kl_div": ("input", "target") + LOSS3 + ("log_target",),
    "l1_loss": ("input", "target") + LOSS3,
    "mse_loss": ("input", "target") + LOSS3,
    "smooth_l1_loss": ("input", "target") + LOSS3 + ("beta",),
    "huber_loss": ("input", "target", "reduction", "delta"),
    "conv_transpose1d": ("input", "weight", "bias", "stride", "padding", "output_padding",
                         "groups", "dilation"),
    "conv_transpose2d": ("input", "weight", "bias", "stride", "padding", "output_padding",
                         "groups", "dilation"),
    "dropout": ("input", "p", "training", "inplace"),
    "einsum": ("operands", "equation"),  # OpInfo's op: lambda tensors, equation
    "embedding": ("weight", "input", "padding_idx", "max_norm", "norm_type",
                  "scale_grad_by_freq", "sparse"),  # OpInfo's op: lambda weight, idx
    "eye": ("n", "m"),
    "full_like": ("input", "fill_value"),
    "gather": ("input", "dim", "index"),
    "index_add": ("input", "dim", "index", "source", "alpha"),
    "index_select": ("input", "dim", "index"),
    "scatter": ("input", "dim", "index", "src"),
    "scatter_add": ("input", "dim", "index", "src"),
    "interpolate": ("input", "size", "scale_factor", "mode", "align_corners",
                    "recompute_scale_factor", "antialias"),
    "max": ("input", "dim", "keepdim"),
    "min": ("input", "dim", "keepdim"),
    ("max", "binary"): ("input", "other"),  # torch.max(input, other): the binary maximum
    ("min", "binary"): ("input", "other"),
    "norm": ("input", "p", "dim", "keepdim", "dtype"),
    "ones": ("size",),
    "zeros": ("size",),
    "randn": ("size",),
    "softmin": ("input", "dim", "_stacklevel", "dtype"),
    "split": ("input", "split_size_or_sections", "dim"),
    "std": ("input", "dim", "unbiased", "keepdim"),
    "var": ("input", "dim", "unbiased", "keepdim"),
    "where": ("input", "condition", "other"),  # OpInfo's op: lambda self, condition, other
}


# ---- op_db -----------------------------------------------------------------------------------
_OP_DB = None


def _fake_expecttest() -> types.ModuleType:
    """A stand-in for the `expecttest` package (not packaged by Debian): common_utils reads
    expecttest.ACCEPT and subclasses expecttest.TestCase; nothing here calls
    assertExpectedInline."""
    mod = types.ModuleType("expecttest")
    mod.ACCEPT = False

    class TestCase(unittest.TestCase):
        def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802
            raise unittest.SkipTest("expecttest is a stand-in here")

    mod.TestCase = TestCase
    return mod


def op_db() -> list:
    """PyTorch's OpInfo list, imported once per process. The import parses sys.argv, seeds
    torch's RNG, freezes torch.backends flags and wraps TorchScript calls: all undone here."""
    global _OP_DB
    if _OP_DB is not None:
        return _OP_DB
    if "expecttest" not in sys.modules:
        try:
            __import__("expecttest")
        except ImportError:
            sys.modules["expecttest"] = _fake_expecttest()
    argv, rng = sys.argv, torch.random.get_rng_state()
    script_calls = (torch._C.ScriptFunction.__call__, torch._C.ScriptMethod.__call__)
    sys.argv = argv[:1]
    try:
        from torch.testing._internal.common_methods_invocations import op_db as db
    finally:
        sys.argv = argv
        torch.random.set_rng_state(rng)
        torch._C.ScriptFunction.__call__, torch._C.ScriptMethod.__call__ = script_calls
        setattr(torch.backends, "__allow_nonbracketed_mutation_flag", True)
    _OP_DB = list(db)
    return _OP_DB


def server_name(opinfo) -> str:
    name = opinfo.name
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def opinfo_names() -> list:
    """Every name an OpInfo can stand for on the server, sorted."""
    return sorted({server_name(o) for o in op_db()})


def opinfos(name: str) -> list:
    """The OpInfo entries (variants) of server op `name` that this suite runs."""
    return [o for o in op_db() if server_name(o) == name and
            (name, o.variant_test_name) not in VARIANTS_EXCLUDED]


# ---- samples ---------------------------------------------------------------------------------
class Sample:
    """One OpInfo sample and its PyTorch parameter binding (for KNOWN's predicates)."""

    def __init__(self, name: str, variant: str, index: int, si, signature):
        self.name, self.variant, self.index = name, variant, index
        self.input, self.args, self.kwargs = si.input, tuple(si.args), dict(si.kwargs)
        self.signature = signature

    def get(self, param: str, default=None):
        """The value of PyTorch parameter `param`, given positionally or by keyword."""
        if param in self.kwargs:
            return self.kwargs[param]
        if param in self.signature:
            k = self.signature.index(param)
            values = (self.input,) + self.args
            if k < len(values):
                return values[k]
        return default

    def describe(self) -> str:
        def d(x):
            if isinstance(x, torch.Tensor):
                g = ",grad" if x.requires_grad else ""
                return f"{str(x.dtype)[6:]}{list(x.shape)}{g}"
            if isinstance(x, (list, tuple)):
                inner = ", ".join(d(v) for v in x)
                return f"[{inner}]" if isinstance(x, list) else f"({inner})"
            if isinstance(x, torch.dtype):
                return str(x)
            return repr(x)
        parts = [d(self.input)] + [d(a) for a in self.args] + \
            [f"{k}={d(v)}" for k, v in self.kwargs.items()]
        v = f"[{self.variant}]" if self.variant else ""
        return f"{self.name}{v}#{self.index}({', '.join(parts)})"


def signature(name: str, op: dict, variant: str, args: tuple) -> tuple:
    if name in ("std", "var") and args and isinstance(args[0], bool):
        return ("input", "unbiased")  # std(input, unbiased)
    for key in ((name, variant), name):
        if key in SIGNATURES:
            return SIGNATURES[key]
    return tuple(op["input_names"]) + tuple(a["name"] for a in op["attrs"])


def _numel(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel()
    if isinstance(x, (list, tuple)):
        return sum(_numel(v) for v in x)
    if isinstance(x, dict):
        return sum(_numel(v) for v in x.values())
    return 0


def samples(name: str, op: dict, opinfo, dt: str) -> list:
    """Up to MAX_SAMPLES Samples of one OpInfo entry in dtype dt (deterministic), or [] when
    the OpInfo does not support the dtype."""
    dtype = DTYPES[dt]
    if dtype not in opinfo.supported_dtypes("cpu"):
        return []
    grad = opinfo.supports_autograd and dtype in opinfo.supported_backward_dtypes("cpu")
    torch.manual_seed(zlib.crc32(f"{name}/{opinfo.variant_test_name}/{dt}".encode()))
    pool = []
    for si in opinfo.sample_inputs("cpu", dtype, requires_grad=grad):
        pool.append(si)
        if len(pool) >= SAMPLE_LIMIT:
            break
    keep = [i for i, si in enumerate(pool)
            if _numel((si.input, si.args, si.kwargs)) <= MAX_ELEMENTS]
    if len(keep) > MAX_SAMPLES:
        keep = [keep[round(j * (len(keep) - 1) / (MAX_SAMPLES - 1))] for j in range(MAX_SAMPLES)]
    out = []
    for i in keep:
        si = pool[i]
        out.append(Sample(name, opinfo.variant_test_name, i, si,
                          signature(name, op, opinfo.variant_test_name, tuple(si.args))))
    return out


# ---- translation -----------------------------------------------------------------------------
class Untranslatable(Exception):
    pass


@dataclasses.dataclass
class Call:
    operands: list  # per server input position: torch.Tensor, Python scalar
    attrs: dict
    requires_grad: bool = False


def _attr_value(op: str, param: str, value):
    if isinstance(value, torch.Tensor):
        raise Untranslatable(f"a tensor for {param!r}, which tensord takes as an attribute")
    if isinstance(value, torch.dtype):
        try:
            return tensord.dtypes.name(value)
        except (TypeError, KeyError):
            raise Untranslatable(f"{param}={value}: tensord has no such dtype") from None
    if isinstance(value, (list, tuple)):
        if any(v is None for v in value) and (op, param) not in NONE_IN_LIST:
            raise Untranslatable(f"{param}={value!r}: None inside a list attribute "
                                 "(tensord's ints have no None)")
        if any(isinstance(v, torch.Tensor) for v in value):
            raise Untranslatable(f"{param}: a list of tensors for an attribute")
        return list(value)
    return value


def translate(sample: Sample, op: dict, rewrite=None) -> Call:
    """The server call for a sample (see the module doc), or Untranslatable. rewrite(attrs)
    -> attrs respells the attributes (a KNOWN entry's tensord spelling)."""
    inputs = list(op["input_names"])
    variadic = op["max_inputs"] == -1
    bound = {}
    values = (sample.input,) + sample.args
    if sample.name == "arange":
        # torch.arange(end) | arange(start, end[, step])
        names = ("end",) if len(values) == 1 and "end" not in sample.kwargs else \
            ("start", "end", "step")
    else:
        names = sample.signature
    if len(values) > len(names):
        raise Untranslatable(f"positional argument {len(names)} beyond the known PyTorch "
                             f"signature {names}")
    for param, value in zip(names, values):
        bound[param] = value
    for param, value in sample.kwargs.items():
        bound[param] = value
    slots = {}
    attrs = {}
    call = Call([], attrs)
    for param, value in bound.items():
        if param in inputs:
            if value is None:
                continue
            if isinstance(value, (list, tuple)) and variadic and \
                    all(isinstance(v, torch.Tensor) for v in value):
                slots[param] = list(value)
            elif isinstance(value, torch.Tensor) or \
                    isinstance(value, (bool, int, float)):
                slots[param] = [value]
            else:
                raise Untranslatable(f"input {param!r} given as {type(value).__name__}")
            continue
        if param == "device":
            if str(value) != "cpu":
                raise Untranslatable(f"device={value!r}")
            continue
        if param == "requires_grad":
            call.requires_grad = bool(value)
            continue
        if value is None:
            continue
        if isinstance(value, torch.Tensor) and param not in [a["name"] for a in op["attrs"]]:
            raise Untranslatable(f"a tensor for {param!r}, which is no input of tensord's "
                                 f"{sample.name} (inputs: {', '.join(inputs) or 'none'})")
        attrs[param] = _attr_value(sample.name, param, value)
    gap = None
    for param in inputs:
        if param in slots:
            if gap is not None:
                raise Untranslatable(f"optional input {gap!r} left out before {param!r} "
                                     "(operands are positional)")
            call.operands.extend(slots[param])
        elif gap is None:
            gap = param
    for v in call.operands:
        if isinstance(v, torch.Tensor) and v.dtype not in TORCH_TO_NP:
            raise Untranslatable(f"a {str(v.dtype)[6:]} tensor: tensord has no such dtype")
    if rewrite is not None:
        call.attrs = rewrite(dict(call.attrs))
    return call


TORCH_TO_NP = {torch.float32: np.float32, torch.float64: np.float64, torch.int32: np.int32,
               torch.int64: np.int64, torch.bool: np.bool_}


# ---- running ---------------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    sample: Sample
    dt: str
    kind: str  # pass | mismatch | refused | untranslatable
    detail: str = ""
    reason: str = ""  # the server's ErrorReason of a refusal
    phase: str = ""  # forward | backward (refusals)
    # The outcome of the same sample respelled by the KNOWN entry's rewrite, where it has one.
    rewritten: Optional["Outcome"] = None

    def line(self) -> str:
        what = f"{self.kind}"
        if self.reason:
            what += f" [{self.reason}, {self.phase}]"
        return f"{self.dt} {self.sample.describe()}: {what}: {self.detail}"


def _flat(x) -> list:
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return [x]


def _map(x, fn):
    if isinstance(x, list):
        return [_map(v, fn) for v in x]
    if isinstance(x, tuple):
        return tuple(_map(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    return fn(x)


def _tensors(x) -> list:
    out = []
    _map(x, lambda t: out.append(t) if isinstance(t, torch.Tensor) else None)
    return out


def red_atol(sample: Sample, dt: str) -> float:
    """atol of an accumulating op's results (module doc): eps * sqrt(n) * m^2 with n the
    largest input numel and m the largest |input| (>= 1), at least the dtype's atol."""
    ts = [t for t in _tensors((sample.input, sample.args, sample.kwargs))
          if t.dtype.is_floating_point and t.numel()]
    if not ts:
        return TOL[dt][1]
    n = max(t.numel() for t in ts)
    m = max(1.0, max(float(t.detach().abs().max()) for t in ts))
    return max(TOL[dt][1], EPS[dt] * math.sqrt(n) * m * m)


class Mismatch(Exception):
    pass


def _compare(got: np.ndarray, want: torch.Tensor, tol, what: str) -> None:
    want_np = want.detach().numpy()
    if got.shape != want_np.shape:
        raise Mismatch(f"{what}: shape {list(got.shape)} != torch {list(want_np.shape)}")
    if got.dtype != want_np.dtype:
        raise Mismatch(f"{what}: dtype {got.dtype} != torch {want_np.dtype}")
    if got.dtype.kind in "biu":
        if not np.array_equal(got, want_np):
            bad = int(np.sum(got != want_np))
            raise Mismatch(f"{what}: {bad} of {got.size} values differ")
        return
    rtol, atol = tol
    ok = np.isclose(got, want_np, rtol=rtol, atol=atol, equal_nan=True)
    if not ok.all():
        err = np.abs(got.astype(np.float64) - want_np.astype(np.float64))
        err = np.where(np.isnan(err), np.inf, err)
        k = int(np.argmax(np.where(ok, -1, err)))
        raise Mismatch(f"{what}: {int((~ok).sum())} of {got.size} values off (worst at flat "
                       f"{k}: got {got.reshape(-1)[k]!r}, torch {want_np.reshape(-1)[k]!r}; "
                       f"rtol {rtol:g}, atol {atol:g})")


def _reference(opinfo, sample: Sample, dt: str):
    """PyTorch on the sample: ((input, args, kwargs) widened to float64, with the sample's
    requires-grad flags), the float64 outputs, and the outputs of the typed call (for their
    dtypes only), outputs flattened."""
    def exact(t):
        if isinstance(t, torch.Tensor):
            x = t.detach().clone()
            if x.dtype == torch.float32:
                x = x.to(torch.float64)
            return x.requires_grad_(t.requires_grad) if x.dtype.is_floating_point else x
        if t is torch.float32:
            return torch.float64
        return t

    def typed(t):
        return t.detach().clone() if isinstance(t, torch.Tensor) else t

    x_in, x_args, x_kw = _map(sample.input, exact), _map(sample.args, exact), \
        _map(sample.kwargs, exact)
    with torch.no_grad():
        t_out = _flat(opinfo.op(_map(sample.input, typed), *_map(sample.args, typed),
                                **_map(sample.kwargs, typed)))
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x_out = _flat(opinfo.op(x_in, *x_args, **x_kw))
    finally:
        torch.set_default_dtype(saved)
    return (x_in, x_args, x_kw), x_out, t_out


def _narrow(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.dtype.is_floating_point and x.dtype != like.dtype:
        return x.detach().to(like.dtype)
    return x.detach()


def _check_random(name, sample, got, x_out, t_out, dt, tol):
    """Random ops: randn (shape, dtype, finite) and dropout in training (each element 0 or
    x / (1 - p)). Returns True when the sample was random (checked here)."""
    if name == "randn":
        for k, (g, w) in enumerate(zip(got, t_out)):
            if g.shape != tuple(w.shape) or g.dtype != TORCH_TO_NP[w.dtype]:
                raise Mismatch(f"output {k}: {g.dtype}{list(g.shape)} != torch "
                               f"{w.dtype}{list(w.shape)}")
            if not np.isfinite(g).all():
                raise Mismatch(f"output {k}: not finite")
        return True
    if name == "dropout":
        p = float(sample.get("p", 0.5))
        training = sample.get("training", True)
        if training and 0.0 < p < 1.0:
            x = sample.input.detach().to(torch.float64).numpy()
            g = got[0].astype(np.float64)
            scaled = x / (1.0 - p)
            ok = (g == 0) | np.isclose(g, scaled, rtol=tol[0], atol=tol[1])
            if g.shape != x.shape or not ok.all():
                raise Mismatch("dropout output: an element is neither 0 nor x / (1 - p)")
            return True
    return False


def run_sample(sess, name: str, op: dict, opinfo, sample: Sample, dt: str,
               rewrite=None) -> Outcome:
    def outcome(kind, detail="", reason="", phase=""):
        return Outcome(sample, dt, kind, detail, reason, phase)
    try:
        call = translate(sample, op, rewrite)
    except Untranslatable as exc:
        return outcome("untranslatable", str(exc))
    rng = np.random.default_rng(zlib.crc32(f"{sample.describe()}/{dt}".encode()))
    tol = TOL[dt]
    if name in REDUCING:
        tol = (tol[0], red_atol(sample, dt))
    leaves_t = [t for t in call.operands if isinstance(t, torch.Tensor) and t.requires_grad
                and t.dtype.is_floating_point]
    ctx = sess.autodiff() if leaves_t or call.requires_grad else None
    try:
        server_in, leaves = [], []
        for v in call.operands:
            if isinstance(v, torch.Tensor):
                arr = v.detach().numpy()
                t = sess.tensor(arr, requires_grad=any(v is lt for lt in leaves_t), ctx=ctx)
                if any(v is lt for lt in leaves_t):
                    leaves.append((v, t))
                server_in.append(t)
            else:
                server_in.append(v)
        try:
            outs = sess.op(name, *server_in, requires_grad=call.requires_grad,
                           ctx=ctx if call.requires_grad else None, **call.attrs)
        except tensord.TensordError as exc:
            return outcome("refused", exc.message, exc.reason, "forward")
        except (TypeError, ValueError, tensord.TensordClientError) as exc:
            return outcome("untranslatable", f"the client cannot encode the call: {exc}")
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        got = [o.numpy() for o in outs]
        (x_in, x_args, x_kw), x_out, t_out = _reference(opinfo, sample, dt)
        if len(got) != len(t_out):
            return outcome("mismatch", f"{len(got)} outputs, torch has {len(t_out)}")
        try:
            if _check_random(name, sample, got, x_out, t_out, dt, tol):
                return _random_grads(sample, dt, ctx, outs, got, leaves, tol, outcome)
            for k, (g, x, w) in enumerate(zip(got, x_out, t_out)):
                _compare(g, _narrow(x, w), tol, f"output {k}")
        except Mismatch as exc:
            return outcome("mismatch", str(exc))
        # Gradients: every float output PyTorch differentiates, seeded at random.
        roots = [(o, x, w) for o, x, w in zip(outs, x_out, t_out)
                 if w.dtype.is_floating_point and x.requires_grad]
        if not leaves or not roots:
            return outcome("pass")
        for k, (o, _, _) in enumerate(roots):
            if not o.requires_grad:
                return outcome("mismatch", f"float output {k} is not an autodiff tensor")
        seeds = [rng.standard_normal(tuple(w.shape)).astype(TORCH_TO_NP[w.dtype])
                 for _, _, w in roots]
        try:
            grads = ctx.backward([o for o, _, _ in roots], seed=seeds)
        except tensord.TensordError as exc:
            return outcome("refused", exc.message, exc.reason, "backward")
        x_leaves = [t for t in _tensors((x_in, x_args, x_kw))
                    if t.dtype.is_floating_point and t.requires_grad]
        # translate() keeps tensors in the sample's order, so exact leaves pair up with the
        # sample's requires-grad tensors that became operands.
        s_leaves = [t for t in _tensors((sample.input, sample.args, sample.kwargs))
                    if t.dtype.is_floating_point and t.requires_grad]
        pick = [x_leaves[i] for i, t in enumerate(s_leaves) if any(t is lv for lv, _ in leaves)]
        by_sample = {id(lv): st for lv, st in leaves}
        ordered = [(t, by_sample[id(t)]) for t in s_leaves if id(t) in by_sample]
        t_grads = torch.autograd.grad(
            [x for _, x, _ in roots], pick,
            grad_outputs=[torch.from_numpy(s).to(x.dtype) for s, (_, x, _) in zip(seeds, roots)],
            allow_unused=True)
        try:
            for k, ((src, st), tg) in enumerate(zip(ordered, t_grads)):
                g = grads.get(st)
                if tg is None or (g is None and not tg.any()):
                    if g is not None and np.any(g.numpy()):
                        raise Mismatch(f"grad of leaf {k}: nonzero where torch has none")
                    continue
                if g is None:
                    raise Mismatch(f"grad of leaf {k}: none from the server")
                _compare(g.numpy(), _narrow(tg, src), tol, f"grad of leaf {k}")
        except Mismatch as exc:
            return outcome("mismatch", str(exc))
        return outcome("pass")
    finally:
        if ctx is not None:
            ctx.close()


def _random_grads(sample, dt, ctx, outs, got, leaves, tol, outcome):
    """dropout in training: the gradient is seed * (output != 0) / (1 - p)."""
    if not leaves or not outs[0].requires_grad:
        return outcome("pass")
    p = float(sample.get("p", 0.5))
    seed = np.ones(got[0].shape, dtype=got[0].dtype)
    try:
        grads = ctx.backward([outs[0]], seed=[seed])
    except tensord.TensordError as exc:
        return outcome("refused", exc.message, exc.reason, "backward")
    g = grads.get(leaves[0][1])
    want = (got[0] != 0) / (1.0 - p)
    if g is None or not np.allclose(g.numpy(), want, rtol=tol[0], atol=tol[1]):
        return outcome("mismatch", "dropout gradient is not (output != 0) / (1 - p)")
    return outcome("pass")


def run_op(sess, name: str, op: dict, dts=("f64", "f32"), known=None) -> list:
    """Every selected sample of every OpInfo variant of `name`, per dtype: [Outcome]. A sample
    that fails as a KNOWN entry with a rewrite says is run again in tensord's spelling."""
    known = KNOWN if known is None else known
    results = []
    for opinfo in opinfos(name):
        supported = opinfo.supported_dtypes("cpu")
        for dt in dts if any(DTYPES[d] in supported for d in dts) else INT_FALLBACK:
            for sample in samples(name, op, opinfo, dt):
                o = run_sample(sess, name, op, opinfo, sample, dt)
                if o.kind != "pass":
                    fix = next((k for k in known if k.rewrite is not None and k.matches(o)),
                               None)
                    if fix is not None:
                        o.rewritten = run_sample(sess, name, op, opinfo, sample, dt,
                                                 fix.rewrite)
                results.append(o)
    return results


def main() -> int:
    """Runs every op against a fresh server and prints each non-pass outcome and the counts."""
    import time
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import conftest
    proc = conftest.ServerProcess(conftest.server_binary(), Path("/tmp/torch_samples_server.log"))
    proc.start()
    t0 = time.monotonic()
    try:
        client = tensord.connect(proc.address)
        catalog = {o["name"]: o for o in client.ops()}
        names = [n for n in opinfo_names() if n in catalog]
        counts = {}
        problems = []
        for name in names:
            with client.session() as sess:
                results = run_op(sess, name, catalog[name])
            for o in results:
                counts[(o.dt, o.kind)] = counts.get((o.dt, o.kind), 0) + 1
                if o.rewritten is not None:
                    key = (o.dt, f"respelled, {o.rewritten.kind}")
                    counts[key] = counts.get(key, 0) + 1
                if o.kind != "pass":
                    print(o.line())
            problems += check(name, results)
        print(f"\n{len(names)} served ops have an OpInfo; {time.monotonic() - t0:.1f}s")
        for key in sorted(counts):
            print(f"  {key[0]} {key[1]}: {counts[key]}")
        print(f"{len(problems)} problems")
        print(known_table())
        for p in problems:
            print("  " + p)
        return 1 if problems else 0
    finally:
        proc.stop()


if __name__ == "__main__":
    sys.exit(main())
