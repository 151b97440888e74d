"""The PyTorch-style examples (client/python/examples/mlp_classifier.py, cnn_images.py,
char_transformer.py, char_lstm.py) train with a few steps on the test server and their loss falls; one runs
as a script that starts its own server ($TENSORD_BIN), printing its progress bar."""
import contextlib
import importlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, server_binary

EXAMPLES = REPO / "client" / "python" / "examples"


@pytest.fixture(scope="module")
def examples():
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield lambda name: importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLES))


CASES = [  # (example, arguments)
    ("mlp_classifier", ["--steps", "80"]),
    ("cnn_images", ["--steps", "30"]),
    ("char_transformer", ["--steps", "60", "--batch", "16", "--block", "32", "--sample", "20"]),
    ("char_lstm", ["--steps", "60", "--batch", "16", "--block", "32", "--sample", "20"]),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_example_loss_falls(examples, address, capsys, name, args):
    losses = examples(name).main(["--address", address, *args])
    steps = int(args[args.index("--steps") + 1])
    assert len(losses) == steps and all(np.isfinite(losses))
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < 0.8 * first, f"{name}: loss {first:.3f} -> {last:.3f}"
    out = capsys.readouterr().out
    assert re.search(rf"\] {steps}/{steps}  loss [0-9.]+ \(avg [0-9.]+\)\s+[0-9.]+ steps/s", out)
    if name.startswith("char_"):
        assert "--- the model goes on ---" in out
    else:
        assert re.search(r"test accuracy [0-9.]+", out)


def test_example_runs_as_a_script_with_its_own_server():
    env = dict(os.environ, TENSORD_BIN=str(server_binary()))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "mlp_classifier.py"), "--steps", "20"],
                          capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "started " in out and re.search(r"\] 20/20  loss", out), out
    assert re.search(r"test accuracy [0-9.]+", out), out


def _side_by_side():
    """The two code blocks of client/python/README.md's "A PyTorch script and its tensord
    version"."""
    text = (REPO / "client" / "python" / "README.md").read_text()
    section = text.split("### A PyTorch script and its tensord version", 1)[1].split("</table>")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    return blocks


def _run(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<README>", "exec"), {"__name__": "__readme__"})
    return out.getvalue()


def test_readme_side_by_side_differs_only_in_imports_and_session(address):
    import tensord
    torch_code, tensord_code = _side_by_side()
    torch_lines, tensord_lines = torch_code.splitlines(), tensord_code.splitlines()
    assert len(torch_lines) == len(tensord_lines)
    differing = [i for i, (a, b) in enumerate(zip(torch_lines, tensord_lines)) if a != b]
    assert differing == [0, 1, 2]
    assert all(torch_lines[i].startswith(("import ", "from ")) for i in (0, 1))
    assert torch_lines[2] == "" and "tensord.connect(" in tensord_lines[2]
    want = float(re.search(r"accuracy ([0-9.]+)", _run(torch_code)).group(1))
    session_line = tensord_lines[2]
    code = tensord_code.replace(re.search(r'connect\("([^"]+)"\)', session_line).group(1),
                                address)
    try:
        out = _run(code)
    finally:
        sess = tensord.get_session()
        tensord.set_session(None)
        if sess is not None:
            sess.close()
            sess.client.close()
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", out)]
    assert len(losses) == 6 and losses[-1] < losses[0], out
    got = float(re.search(r"accuracy ([0-9.]+)", out).group(1))
    assert got > 0.95 and want > 0.95, (got, want)
