"""Sessions share the server's cores: a call runs on its own server thread with at most
--threads intra-op threads, and nothing a session holds (its lock, its tensors) is held for
another, so one session's long batch does not hold back another session's calls."""
import threading
import time

import numpy as np
import pytest

from conftest import client_of_own_server


@pytest.fixture(scope="module")
def one_thread_client(tmp_path_factory):
    with client_of_own_server(tmp_path_factory, "fairness", ["--threads", "1"]) as client:
        yield client


def test_a_long_batch_does_not_hold_back_another_sessions_calls(one_thread_client):
    client = one_thread_client
    rng = np.random.default_rng(7)
    with client.session() as busy, client.session() as other:
        x = busy.tensor(rng.standard_normal((320, 320)))
        small = other.tensor(np.arange(4.0))
        tries = []
        for _ in range(3):
            finished = {}

            def long_batch():
                with busy.batch():
                    h = x
                    for _ in range(150):
                        h = (h @ x) * 0.01
                finished["busy"] = time.perf_counter()

            worker = threading.Thread(target=long_batch)
            worker.start()
            time.sleep(0.1)  # the batch is on the server by now
            for k in range(20):
                np.testing.assert_array_equal((small + float(k)).numpy(), np.arange(4.0) + k)
            finished["other"] = time.perf_counter()
            worker.join()
            tries.append(finished["busy"] - finished["other"])
            if tries[-1] > 0:
                break
        assert any(lead > 0 for lead in tries), (
            f"the other session's 20 calls ended after the long batch (seconds after it: "
            f"{[-t for t in tries]})")
