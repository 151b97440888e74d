"""tensord.nn: PyTorch's torch.nn over a tensord session.

    import tensord, tensord.nn as nn, tensord.nn.functional as F
    tensord.set_session(sess)                  # or session=sess to each layer
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = tensord.optim.SGD(model.parameters(), lr=0.1)
    loss = nn.CrossEntropyLoss()(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()

torch models convert both ways: nn.from_torch(torch_model) and model.to_torch(); torch
tensors go in as they are (sess.tensor(t), or any operand) and come back with t.torch().

Parameters are requires-grad leaves of the session's autodiff context (sess.grad_context());
their initial values are drawn by numpy (tensord.manual_seed) with PyTorch's distributions.
See client/python/README.md, "Training like PyTorch".
"""
from . import functional, init, utils
from .activation import (ELU, GELU, SELU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,
                         LogSigmoid, LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax,
                         Softmin, Softplus, Softsign, Tanh)
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from .dropout import Dropout
from .flatten import Flatten
from .interop import from_torch
from .linear import Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss,
                   MSELoss, NLLLoss, SmoothL1Loss)
from .module import Module, set_forward_batching, to_torch_state_dict
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from .parameter import Parameter
from .rnn import GRU, LSTM, RNN, RNNBase
from .rnn_cell import GRUCell, LSTMCell, RNNCell, RNNCellBase
from .pooling import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d,
                      MaxPool2d)
from .sparse import Embedding
from .attention import MultiheadAttention, NonDynamicallyQuantizableLinear
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "to_torch_state_dict", "from_torch",
    "set_forward_batching",
    "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "Conv1d", "Conv2d",
    "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "MultiheadAttention",
    "NonDynamicallyQuantizableLinear", "TransformerEncoderLayer", "TransformerEncoder",
    "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm", "Embedding", "Dropout", "Flatten",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "ReLU", "ReLU6", "GELU", "Tanh", "Sigmoid", "SiLU", "SELU", "ELU", "Mish", "LeakyReLU",
    "Softplus", "Softsign", "LogSigmoid", "Hardtanh", "Hardsigmoid", "Hardswish", "Softmax",
    "LogSoftmax", "Softmin",
    "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss", "RNNBase", "RNN", "LSTM", "GRU",
    "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
]
