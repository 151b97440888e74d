"""The narrow integer dtypes u8 / i8 / i16 through the Python client, with PyTorch (CPU) as the
oracle: names, uploads and downloads (numpy and torch, 0-d and empty), promotion, wrapping
arithmetic, i64 reductions, casts to and from every dtype, comparisons, an image batch
normalised to f32, and the refusal of narrow index operands (DTYPE_MISMATCH)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensord
from tensord import dtypes

NARROW = {"u8": torch.uint8, "i8": torch.int8, "i16": torch.int16}
TORCH = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
         "bool": torch.bool, "bf16": torch.bfloat16, "f16": torch.float16, **NARROW}
EXTREMES = {"u8": [0, 1, 127, 128, 200, 255], "i8": [-128, -1, 0, 1, 100, 127],
            "i16": [-32768, -129, -1, 0, 255, 256, 32767]}
U8 = torch.tensor([250, 3, 200, 0], dtype=torch.uint8)
I8 = torch.tensor([-1, 5, -128, 127], dtype=torch.int8)
I16 = torch.tensor([1000, -2, 32767, -32768], dtype=torch.int16)


def same(got, want, what=""):
    """A tensord result against torch's: dtype and values exactly."""
    got = got.torch()
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, torch {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, torch {tuple(want.shape)}"
    assert torch.equal(got, want), f"{what}: {got.tolist()} != torch {want.tolist()}"


def test_dtype_names_and_objects():
    for short, np_type, t in (("u8", np.uint8, torch.uint8), ("i8", np.int8, torch.int8),
                              ("i16", np.int16, torch.int16)):
        for spelling in (short, np_type, np.dtype(np_type), t, str(t), np.dtype(np_type).name):
            assert dtypes.name(spelling) == short, spelling
        assert dtypes.to_numpy_dtype(short) == np.dtype(np_type)
        assert dtypes.torch_dtype(short) == t
    assert dtypes.name("short") == "i16"
    assert (tensord.uint8, tensord.int8, tensord.int16) == (np.uint8, np.int8, np.int16)
    for wire, short in ((8, "u8"), (9, "i8"), (10, "i16")):
        assert dtypes.to_wire(short) == wire and dtypes.name(dtypes.from_wire(wire)) == short


@pytest.mark.parametrize("dt", NARROW)
def test_numpy_round_trips(sess, dt):
    np_dt = dtypes.to_numpy_dtype(dt)
    x = np.array(EXTREMES[dt], np_dt)
    cases = [x, x.reshape(1, -1, 1), x[::2], np.array(x[-1]), np.zeros((0,), np_dt),
             np.zeros((2, 0, 3), np_dt), x.astype(np_dt.newbyteorder(">"))]
    for a in cases:
        t = sess.tensor(a)
        assert dtypes.name(t.dtype) == dt and t.shape == a.shape
        assert t.nbytes == a.size * np_dt.itemsize
        assert f"dtype={dt}" in repr(t)
        got = t.numpy()
        assert got.dtype == np_dt and got.shape == a.shape
        np.testing.assert_array_equal(got, a)
    assert sess.tensor(np.array(x[-1])).item() == EXTREMES[dt][-1]
    # dtype= converts on upload (numpy's astype: wraps an int64 like torch's .to()).
    wide = np.array([-129, 300, 65536 + 7], np.int64)
    t = sess.tensor(wide, dtype=dt)
    np.testing.assert_array_equal(t.numpy(), torch.from_numpy(wide).to(NARROW[dt]).numpy())


@pytest.mark.parametrize("dt", NARROW)
def test_torch_interop_both_ways(sess, dt):
    x = torch.tensor(EXTREMES[dt], dtype=NARROW[dt])
    for t in (x, x.view(2, -1) if x.numel() % 2 == 0 else x.view(1, -1), x.flip(0),
              x.unsqueeze(1).expand(-1, 3).t(), x[0], x[:0]):
        d = sess.tensor(t)
        assert dtypes.name(d.dtype) == dt
        same(d, t.contiguous(), f"{dt} {tuple(t.shape)}")
    # A torch tensor as an operand (an inline literal), and dtype= with torch's conversion.
    same(sess.op("add", sess.tensor(x), x), x + x, f"{dt} + torch literal")
    f = torch.tensor([-3.7, 0.5, 100.9])
    same(sess.tensor(f, dtype=NARROW[dt]), f.to(NARROW[dt]), f"f32 uploaded as {dt}")
    same(sess.tensor(x.numpy(), dtype="f32"), x.to(torch.float32), f"{dt} uploaded as f32")


ZERO_D_I8 = torch.tensor(-1, dtype=torch.int8)
ZERO_D_F64 = torch.tensor(2.0, dtype=torch.float64)
PROMOTION = [
    ("add", U8, I8), ("add", U8, I16), ("add", I8, I16), ("add", I8, U8),
    ("add", torch.tensor([True, False, True, True]), U8), ("add", U8, 5), ("add", U8, 300),
    ("add", U8, 2.5), ("mul", I8, 0.5), ("add", U8, torch.tensor([1, -2, 3, 4], dtype=torch.int32)),
    ("mul", I16, torch.tensor([3, 3, -3, 2], dtype=torch.int64)),
    ("add", U8, torch.tensor([0.5, 1.5, 2.5, 3.5], dtype=torch.float16)),
    ("add", I8, torch.tensor([0.5, 1.5, 2.5, 3.5], dtype=torch.bfloat16)),
    ("add", U8, torch.tensor([0.25, 1.5, -2.5, 3.0], dtype=torch.float64)),
    ("add", U8, ZERO_D_I8), ("mul", U8, ZERO_D_F64), ("add", I16, torch.tensor(7)),
    ("sub", U8, I8), ("maximum", U8, I8), ("minimum", I8, I16),
]
TORCH_FN = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
            "minimum": torch.minimum}


def _label(v):
    return str(v.dtype)[6:] + ("_0d" if v.dim() == 0 else "") if torch.is_tensor(v) else repr(v)


@pytest.mark.parametrize("op,a,b", PROMOTION,
                         ids=[f"{o}-{_label(a)}-{_label(b)}" for o, a, b in PROMOTION])
def test_promotion_like_torch(sess, op, a, b):
    want = TORCH_FN[op](a, b)
    b_arg = sess.tensor(b) if torch.is_tensor(b) else b
    same(sess.op(op, sess.tensor(a), b_arg), want, f"{op}({_label(a)}, {_label(b)})")


def test_wrapping_arithmetic_like_torch(sess):
    u = sess.tensor(U8)
    same(u + 10, U8 + 10, "u8 + 10")
    assert (sess.tensor(np.array([250], np.uint8)) + 10).tolist() == [4]
    same(10 - u, 10 - U8, "10 - u8")
    same(u - sess.tensor(U8.flip(0)), U8 - U8.flip(0), "u8 - u8")
    same(u * u, U8 * U8, "u8 * u8")
    same(sess.tensor(I8) + 1, I8 + 1, "i8 + 1")
    same(sess.tensor(I8) * sess.tensor(I8), I8 * I8, "i8 * i8")
    same(sess.tensor(I16) * sess.tensor(I16), I16 * I16, "i16 * i16")
    same(sess.tensor(I16) - 1, I16 - 1, "i16 - 1")
    same(-u, -U8, "-u8")
    same(-sess.tensor(I8), -I8, "-i8 (-(-128) wraps)")
    same(sess.op("abs", sess.tensor(I8)), I8.abs(), "abs i8")
    same(u // 7, U8 // 7, "u8 // 7")
    same(sess.tensor(I8) // 3, I8 // 3, "i8 // 3 (floor)")
    same(sess.tensor(I8) % 3, I8 % 3, "i8 % 3")
    same(sess.op("div", sess.tensor(I8), 3, rounding_mode="trunc"),
         torch.div(I8, 3, rounding_mode="trunc"), "div trunc i8")
    d = sess.op("div", u, sess.tensor(torch.full((4,), 3, dtype=torch.uint8)))
    assert d.torch().dtype == torch.float32  # true division of ints gives f32, as torch
    torch.testing.assert_close(d.torch(), U8 / 3, rtol=1e-6, atol=0)
    same(u & sess.tensor(I8.view(torch.uint8)), U8 & I8.view(torch.uint8), "u8 & u8")
    same(~u, ~U8, "~u8")
    same(sess.tensor(I8) ^ sess.tensor(I8.flip(0)), I8 ^ I8.flip(0), "i8 ^ i8")


@pytest.mark.parametrize("dt", NARROW)
def test_reductions_accumulate_in_i64(sess, dt):
    x = torch.tensor(EXTREMES[dt] * 3, dtype=NARROW[dt]).view(3, -1)
    t = sess.tensor(x)
    same(sess.op("sum", t), x.sum(), f"sum {dt}")
    same(sess.op("sum", t, dim=[1]), x.sum(1), f"sum {dt} dim 1")
    same(sess.op("sum", t, dtype="i32"), x.sum(dtype=torch.int32), f"sum {dt} dtype=i32")
    small = torch.tensor([3, 100, 7, 2], dtype=NARROW[dt])  # 4200: wraps in 8 bits, not in i64
    same(sess.op("prod", sess.tensor(small)), small.prod(), f"prod {dt}")
    same(sess.op("cumsum", t, dim=1), x.cumsum(1), f"cumsum {dt}")
    values, _ = sess.op("max", t, dim=1)
    same(values, x.max(1).values, f"max {dt} dim 1")
    assert sess.op("sum", sess.tensor(np.array([250, 250], np.uint8))).item() == 500


FLOATS = [-3.7, -1.0, -0.5, 0.0, 0.5, 1.9, 100.2, 127.0]
OUT_OF_RANGE = {"u8": [254.9, 300.7, -200.2, -1.5], "i8": [], "i16": [30000.5, -32000.9]}
INTS = [-129, -1, 0, 1, 127, 255, 256, 32767, 32768, 70000, -40000]


def _source(src, dst):
    """Values of dtype `src` to cast to `dst`: floats in dst's range (u8 also out of it: torch
    goes through int64 and wraps), ints anywhere (integer casts wrap), bool both."""
    if src == "bool":
        return torch.tensor([True, False, True])
    if src in NARROW:
        return torch.tensor(EXTREMES[src], dtype=NARROW[src])
    if TORCH[src].is_floating_point:
        vals = FLOATS + (OUT_OF_RANGE.get(dst, []))
        return torch.tensor(vals, dtype=torch.float64).to(TORCH[src])
    return torch.tensor(INTS, dtype=TORCH[src])


CASTS = sorted({(s, d) for s in TORCH for d in NARROW} | {(s, d) for s in NARROW for d in TORCH})


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{s}-to-{d}" for s, d in CASTS])
def test_casts_like_torch(sess, src, dst):
    x = _source(src, dst)
    t = sess.tensor(x)
    assert dtypes.name(t.dtype) == src
    same(t.to(dst), x.to(TORCH[dst]), f"to_dtype {src} -> {dst}")
    same(sess.op("to_dtype", t, dtype=TORCH[dst]), x.to(TORCH[dst]), f"{src} -> torch.{dst}")


def test_dtype_attribute_spellings(sess):
    t = sess.tensor(I16)
    for spelling, want in (("u8", torch.uint8), ("i8", torch.int8), ("i16", torch.int16),
                           ("uint8", torch.uint8), ("int8", torch.int8), ("int16", torch.int16),
                           ("short", torch.int16)):
        # A string attribute travels as it is: the server reads the spelling itself.
        same(sess.op("to_dtype", t, dtype=spelling), I16.to(want), spelling)
        same(t.to(spelling), I16.to(want), f"Tensor.to({spelling!r})")
    z = sess.op("zeros", shape=[2, 3], dtype="u8")
    same(z, torch.zeros(2, 3, dtype=torch.uint8), "zeros u8")
    same(sess.op("full", shape=[2], value=7, dtype=np.int8), torch.full((2,), 7, dtype=torch.int8),
         "full i8")


def test_comparisons_give_bool(sess):
    u, i8, i16 = sess.tensor(U8), sess.tensor(I8), sess.tensor(I16)
    same(u > i8, U8 > I8, "u8 > i8 (compared as i16)")
    same(u < 100, U8 < 100, "u8 < 100")
    same(i16 >= i8, I16 >= I8, "i16 >= i8")
    same(sess.op("eq", u, 200), U8 == 200, "eq u8 200")
    same(sess.op("ne", i8, sess.tensor(I8.flip(0))), I8 != I8.flip(0), "ne i8")
    same(sess.op("lt", i16, 2.5), I16 < 2.5, "lt i16 2.5")
    f = torch.tensor([250.5, 2.0, 200.0, -1.0])
    same(sess.op("le", u, sess.tensor(f)), U8 <= f, "u8 <= f32")
    same(sess.op("where", u > 100, u, i8), torch.where(U8 > 100, U8, I8), "where u8 i8")


def test_u8_compared_with_a_negative_int_like_torch(sess):
    # torch casts the Python int to the tensor's dtype (u8): -1 is 255 there.
    u = sess.tensor(U8)
    same(u < -1, U8 < -1, "u8 < -1")
    same(u > -1, U8 > -1, "u8 > -1")


def test_u8_image_batch_normalised_to_f32(sess):
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (4, 3, 8, 8), generator=g, dtype=torch.uint8)
    x = sess.tensor(images)
    y = x.to("f32") / 255
    same(y, images.to(torch.float32) / 255, "u8 image / 255")
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    z = (y - mean.numpy()) / std.numpy()
    torch.testing.assert_close(z.torch(), (images.float() / 255 - mean) / std, rtol=1e-6, atol=1e-6)
    assert sess.op("max", x).item() == images.max().item()


def _refused(call):
    with pytest.raises(tensord.DtypeMismatch) as e:
        call().numpy()
    assert e.value.reason == "DTYPE_MISMATCH"
    return e.value


@pytest.mark.parametrize("dt", NARROW)
def test_narrow_index_operands_are_refused(sess, dt):
    x = torch.arange(12, dtype=torch.float32).view(4, 3)
    idx = torch.tensor([0, 2, 3], dtype=NARROW[dt])
    with pytest.raises(RuntimeError):
        torch.index_select(x, 0, idx)  # torch refuses it too
    _refused(lambda: sess.op("index_select", sess.tensor(x), sess.tensor(idx), dim=0))
    _refused(lambda: sess.op("index_select", sess.tensor(x), idx.numpy(), dim=0))
    same(sess.op("index_select", sess.tensor(x), sess.tensor(idx.long()), dim=0),
         torch.index_select(x, 0, idx.long()), "index_select i64 index")
    g = idx.view(3, 1).expand(3, 3).contiguous()
    with pytest.raises(RuntimeError):
        torch.gather(x, 0, g)
    _refused(lambda: sess.op("gather", sess.tensor(x), sess.tensor(g), dim=0))
    with pytest.raises(RuntimeError):
        TF.embedding(idx, x)
    _refused(lambda: sess.op("embedding", sess.tensor(idx), sess.tensor(x)))
    # (torch 1.13 takes a uint8 target here; tensord asks for i32/i64 class indices.)
    _refused(lambda: sess.op("cross_entropy", sess.tensor(x[:3]), sess.tensor(idx % 3)))
    # As input (not index) a narrow tensor selects like any other.
    same(sess.op("index_select", sess.tensor(idx), np.array([2, 0]), dim=0),
         idx[[2, 0]], f"index_select of a {dt} input")


INDEX_ONLY = {"embedding", "one_hot"}  # their i32 is the index operand's


def test_list_ops_names_narrow_ints_wherever_i32(catalog):
    missing = [(name, dt) for name, op in catalog.items() if "i32" in op["dtypes"] and
               name not in INDEX_ONLY for dt in NARROW if dt not in op["dtypes"]]
    assert not missing, missing
    for name in ("add", "sum", "to_dtype", "bitwise_and", "eq", "cumsum"):
        assert {"u8", "i8", "i16"} <= set(catalog[name]["dtypes"]), name


def test_u8_key_padding_mask_means_bool(nsess):
    m = tensord.nn.MultiheadAttention(8, 2, batch_first=True)
    q = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    pad = np.array([[False, False, True], [False, True, True]])
    want, _ = m(q, q, q, key_padding_mask=nsess.tensor(pad))
    for mask in (nsess.tensor(pad.astype(np.uint8)), pad.astype(np.uint8)):
        got, _ = m(q, q, q, key_padding_mask=mask)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
