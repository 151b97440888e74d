"""The training example reaches >= 95% accuracy on the two-moons problem through the server."""
import re
import subprocess
import sys

from conftest import REPO

EXAMPLE = REPO / "client" / "python" / "examples" / "train_mlp.py"


def test_train_mlp_example(address):
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--address", address, "--steps", "150",
                           "--min-accuracy", "0.95"], capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    match = re.search(r"final accuracy ([0-9.]+)", out)
    assert match, out
    assert float(match.group(1)) >= 0.95, out
    assert proc.returncode == 0, out
    assert "loss" in out
