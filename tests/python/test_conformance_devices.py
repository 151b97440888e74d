"""The conformance table of test_conformance.py on the accelerator devices: every op a
device's backend serves, compared with PyTorch exactly as on the CPU (values, dtypes,
gradients). TENSORD_TEST_DEVICES names the devices, comma-separated (default opencl:0; cpu
entries are test_conformance.py's). A device the server lacks skips, unless TENSORD_REQUIRE_GPU
is set (CI), where it fails. A call the device's backend refuses (UNSUPPORTED_ON_BACKEND, listed
in docs/devices.md) skips with the server's message."""
import os
import zlib

import numpy as np
import pytest
import tensord

from opcheck import run_case
from opcheck_low import LOW, run_low
from opcheck_narrow import NARROW, run_narrow
from optable import TABLE
from test_conformance import DTYPES, table_dtypes

DEVICES = [d for d in os.environ.get("TENSORD_TEST_DEVICES", "opencl:0").split(",")
           if d and d != "cpu"]


@pytest.fixture(scope="module")
def device_kinds(client):
    return {d["name"]: d["kind"] for d in client.devices()}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(TABLE))
@pytest.mark.parametrize("device", DEVICES)
def test_op_on_device(device, name, dt, catalog, client, device_kinds):
    if device not in device_kinds:
        if os.environ.get("TENSORD_REQUIRE_GPU"):
            pytest.fail(f"the server has no device {device} (devices: {sorted(device_kinds)})")
        pytest.skip(f"the server has no device {device}")
    spec = TABLE[name]
    if device_kinds[device] not in catalog[name]["backends"]:
        pytest.skip(f"{name} does not run on {device}")
    if dt not in table_dtypes(spec) or dt not in catalog[name]["dtypes"]:
        pytest.skip(f"{name} is not listed for {dt}")
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dt}".encode()))
    with client.session(device=device) as sess:
        try:
            if dt in LOW:
                run_low(sess, name, spec, dt, rng)
            elif dt in NARROW:
                run_narrow(sess, name, spec, dt, rng)
            elif spec.run is not None:
                spec.run(sess, name, spec, dt, rng)
            else:
                for case in spec.gen(rng, dt):
                    run_case(sess, name, spec, case, dt, rng)
        except tensord.TensordError as exc:
            if exc.reason != "UNSUPPORTED_ON_BACKEND":
                raise
            pytest.skip(f"{device} refuses {name}[{dt}]: {exc}")
