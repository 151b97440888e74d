"""docs/ops.md is the catalog the server serves: regenerate it with scripts/ops-doc.py after
adding or changing an op."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _ops_doc():
    spec = importlib.util.spec_from_file_location("ops_doc", ROOT / "scripts" / "ops-doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_ops_md_matches_the_served_catalog(client):
    ops_doc = _ops_doc()
    want = ops_doc.render([op for op in client.ops() if op["origin"] == "builtin"])
    got = (ROOT / "docs" / "ops.md").read_text()
    assert got == want, "docs/ops.md is stale: run scripts/ops-doc.py"


def test_every_served_op_has_a_row(client):
    text = (ROOT / "docs" / "ops.md").read_text()
    missing = [op["name"] for op in client.ops()
               if op["origin"] == "builtin" and f"| `{op['name']}` |" not in text]
    assert not missing, f"ops without a row in docs/ops.md: {missing}"
