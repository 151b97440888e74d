"""tensord: Python client for the tensord tensor-compute server.

    import tensord
    with tensord.connect("127.0.0.1:50051") as client, client.session() as sess:
        a = sess.tensor(np.ones((2, 3), np.float32))
        print((a @ a.T).numpy())

Errors raise TensordError subclasses named after tensord.v1.ErrorReason (see errors.py).
"""
from . import autograd, defaults, distributed, dtypes, nn, optim
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .client import Client, connect
from .compiler import CompiledFunction, compile  # noqa: A004  (torch.compile's name)
from .defaults import default_session, get_session, manual_seed, set_session
from .dtypes import (bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64,
                     uint8)
from .errors import *  # noqa: F401,F403  (TensordError and one subclass per ErrorReason)
from .errors import REASON_CLASSES, BatchPendingError, TensordClientError, TensordError
from .session import AutodiffContext, Session
from .shared_memory import SharedMemory
from .tensor import Tensor

__version__ = "0.1.0"

__all__ = ["connect", "Client", "Session", "Tensor", "AutodiffContext", "SharedMemory",
           "TensordError",
           "TensordClientError", "BatchPendingError", "REASON_CLASSES", "dtypes", "optim", "nn",
           "autograd", "defaults", "compile", "CompiledFunction", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled",
           "set_session", "get_session", "default_session", "manual_seed",
           "float32", "float64", "int32", "int64", "bool_", "bfloat16", "float16", "uint8",
           "int8", "int16",
           *(cls.__name__ for cls in REASON_CLASSES.values())]
