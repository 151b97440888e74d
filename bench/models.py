"""The models the benches time: as data (a batch and initial parameters, seeded) and a loss
written with tensord ops (the MLP, the small CNN and a residual convolution block), and as
torch.nn / tensord.nn modules with their batch, loss and optimizer (nn_modules, nn_data,
nn_train_step)."""
import numpy as np


def mlp_data():
    """The MLP's batch and initial parameters (784-256-10, batch 256)."""
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((256, 784)).astype(np.float32)
    yn = rng.integers(0, 10, 256)
    shapes = [(784, 256), (256,), (256, 10), (10,)]
    init = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
    return xn, yn, init


def mlp_loss(sess, params, xb, yb):
    w1, b1, w2, b2 = params
    return sess.op("cross_entropy", sess.op("relu", xb @ w1 + b1) @ w2 + b2, yb)


def cnn_data():
    """The CNN's batch and initial parameters (conv-relu-pool x2 + linear, 3x32x32, batch 64)."""
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((64, 3, 32, 32)).astype(np.float32)
    yn = rng.integers(0, 10, 64)
    shapes = [(16, 3, 3, 3), (16,), (32, 16, 3, 3), (32,), (10, 32 * 8 * 8), (10,)]
    init = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
    return xn, yn, init


def cnn_loss(sess, params, xb, yb):
    c1, b1, c2, b2, w, b = params
    h = sess.op("max_pool2d", sess.op("relu", sess.op("conv2d", xb, c1, b1, padding=1)),
                kernel_size=2)
    h = sess.op("max_pool2d", sess.op("relu", sess.op("conv2d", h, c2, b2, padding=1)),
                kernel_size=2)
    return sess.op("cross_entropy", sess.op("linear", sess.op("flatten", h, start_dim=1), w, b),
                   yb)


def residual_data():
    """A [32, 32, 32, 32] batch and two 3x3 convolutions' weights and biases (no labels)."""
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((32, 32, 32, 32)).astype(np.float32)
    init = [(rng.standard_normal(s) * 0.05).astype(np.float32)
            for s in [(32, 32, 3, 3), (32,), (32, 32, 3, 3), (32,)]]
    return xn, None, init


def residual_block(sess, params, xb):
    """conv + bias + relu, conv + bias + the block's input + relu, summed (so that the
    result's transfer is not what is measured)."""
    c1, b1, c2, b2 = params
    h = sess.op("relu", sess.op("conv2d", xb, c1, b1, padding=1))
    return sess.op("sum", sess.op("relu", sess.op("conv2d", h, c2, b2, padding=1) + xb))


def gated_data():
    """A [256, 512] batch, a 512x512 weight, a bias and a per-feature gain (no labels)."""
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((256, 512)).astype(np.float32)
    init = [(rng.standard_normal(s) * k).astype(np.float32)
            for s, k in [((512, 512), 0.04), ((512,), 0.1), ((512,), 1.0)]]
    return xn, None, init


def gated_loss(sess, params, xb):
    """A transformer-like feed-forward block with a gate: a = gelu(x w + b) * g + x,
    y = sigmoid(a) * a - 0.01 x^2, mean(y^2). Its pointwise trees fuse in a recorded forward."""
    w, b, g = params
    a = sess.op("gelu", sess.op("matmul", xb, w) + b, approximate="tanh") * g + xb
    y = sess.op("sigmoid", a) * a - sess.op("square", xb) * 0.01
    return sess.op("mean", y * y)


NN_LOSSES = {"MLP": "CrossEntropyLoss", "CNN": "CrossEntropyLoss", "Transformer": "MSELoss",
             "LSTM": "MSELoss"}


def nn_modules(ns):
    """The MLP and CNN above, a small transformer encoder and a 2-layer LSTM, built with `ns`
    (torch.nn or tensord.nn)."""
    mlp = ns.Sequential(ns.Linear(784, 256), ns.ReLU(), ns.Linear(256, 10))
    cnn = ns.Sequential(ns.Conv2d(3, 16, 3, padding=1), ns.ReLU(), ns.MaxPool2d(2),
                        ns.Conv2d(16, 32, 3, padding=1), ns.ReLU(), ns.MaxPool2d(2),
                        ns.Flatten(), ns.Linear(32 * 8 * 8, 10))
    layer = ns.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    transformer = ns.Sequential(ns.TransformerEncoder(layer, 2), ns.Linear(64, 10))

    class Recurrent(ns.Module):  # the last step's state of a 2-layer LSTM, then a head
        def __init__(self):
            super().__init__()
            self.lstm = ns.LSTM(32, 64, num_layers=2, batch_first=True)
            self.head = ns.Linear(64, 10)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    return {"MLP": mlp, "CNN": cnn, "Transformer": transformer, "LSTM": Recurrent()}


def nn_data(seed: int = 2):
    """Each nn model's batch (inputs, targets) as numpy arrays."""
    rng = np.random.default_rng(seed)
    return {"MLP": (rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256)),
            "CNN": (rng.standard_normal((64, 3, 32, 32)).astype(np.float32),
                    rng.integers(0, 10, 64)),
            "Transformer": (rng.standard_normal((16, 32, 64)).astype(np.float32),
                            rng.standard_normal((16, 32, 10)).astype(np.float32)),
            "LSTM": (rng.standard_normal((16, 24, 32)).astype(np.float32),
                     rng.standard_normal((16, 10)).astype(np.float32))}


def nn_optimizer(optim, name, params):
    """Adam for the transformer and the LSTM, momentum SGD for the others (`optim`: torch.optim
    or tensord.optim)."""
    if name in ("Transformer", "LSTM"):
        return optim.Adam(params, lr=1e-3)
    return optim.SGD(params, lr=0.01, momentum=0.9)


def nn_train_step(model, opt, loss_fn):
    """A training step as a PyTorch script writes it, for torch and tensord alike."""
    def train_step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return train_step
