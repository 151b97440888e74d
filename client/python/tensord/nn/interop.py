"""Converting models between torch.nn and tensord.nn: `from_torch(torch_model)` and
`module.to_torch()`.

Both rebuild the tree layer by layer (each layer's constructor arguments read from the other
side's attributes, which carry PyTorch's names on both sides), then copy every parameter and
buffer with load_state_dict (strict), and copy each module's training flag and each
parameter's requires_grad. What converts: the layers tensord.nn has (torch.nn's classes of the
same name, exactly those classes) and Sequential / ModuleList / ModuleDict trees of them. A
Module subclass with its own forward() (torch's or tensord's) cannot be translated: its
forward is Python code over the other library's tensors; the error names it and its place in
the tree.
"""
from __future__ import annotations

import inspect
from collections import OrderedDict

import numpy as np

from .. import defaults, dtypes
from ..tensor import Tensor
from .container import ModuleDict, ModuleList, Sequential
from .module import Module
from .parameter import as_array
from .rnn import RNNBase

_SKIPPED_ARGS = {"self", "device", "dtype", "session", "factory_kwargs"}


def _where(path: str) -> str:
    return f"'{path}'" if path else "the model itself"


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _first_float_dtype(tensors):
    for t in tensors:
        dt = t.dtype
        if dtypes.is_bfloat16(dt) or str(dt).replace("torch.", "") in (
                "float32", "float64", "float16") or getattr(dt, "kind", "") == "f":
            return dt
    return None


def _has_bias(module) -> bool:
    for name in ("in_proj_bias", "bias", "bias_ih"):
        if name in getattr(module, "_parameters", {}):
            return module._parameters[name] is not None
    return True


def _constructor_args(target_cls, source, specials: dict, convert_value) -> dict:
    """{argument: value} for target_cls(...) read from `source`'s attributes of the same
    names (PyTorch's on both sides); `specials` overrides; absent ones keep their default."""
    kwargs = {}
    for name, param in inspect.signature(target_cls.__init__).parameters.items():
        if name in _SKIPPED_ARGS or name.startswith("_") or param.kind in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if name in specials:
            kwargs[name] = specials[name]
        elif name == "bias":
            kwargs[name] = _has_bias(source)
        else:
            try:
                value = getattr(source, name)
            except AttributeError:
                continue
            kwargs[name] = convert_value(value)
    return kwargs


_RECURRENT = ("RNN", "LSTM", "GRU")


def _recurrent_args(module) -> dict:
    """The constructor arguments of an RNN, LSTM or GRU of either library (whose constructors
    take *args, **kwargs), read from its attributes."""
    kwargs = {name: getattr(module, name) for name in (
        "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
        "bidirectional")}
    if type(module).__name__ == "LSTM":
        kwargs["proj_size"] = module.proj_size
    if type(module).__name__ == "RNN":
        kwargs["nonlinearity"] = module.nonlinearity
    return kwargs


def _copy_flags(source, target) -> None:
    """training of every module and requires_grad of every parameter, by name."""
    modules = dict(target.named_modules())
    for name, module in source.named_modules():
        if name in modules:
            modules[name].training = module.training
    params = dict(target.named_parameters())
    for name, param in source.named_parameters():
        if name in params and not param.requires_grad and params[name].requires_grad:
            params[name].requires_grad_(False)


def _replace_attention(converter, source, new, path: str) -> None:
    """A transformer layer's attention that its constructor does not make (one given
    add_bias_kv or add_zero_attn after construction) is converted on its own and put in."""
    for name in ("self_attn", "multihead_attn"):
        child = getattr(source, "_modules", {}).get(name)
        if child is not None and (child.bias_k is not None or child.add_zero_attn):
            setattr(new, name, converter.convert(child, f"{path}.{name}" if path else name))


# -- torch -> tensord ---------------------------------------------------------------------------
def _tensord_classes() -> dict:
    from .. import nn
    classes = {name: getattr(nn, name) for name in nn.__all__
               if isinstance(getattr(nn, name), type) and issubclass(getattr(nn, name), Module)}
    for name in ("Module", "Sequential", "ModuleList", "ModuleDict"):
        classes.pop(name, None)
    return classes


def _unsupported_torch(module, path: str) -> Exception:
    cls = type(module)
    if cls.__module__.startswith("torch.nn."):
        why = f"torch.nn.{cls.__name__} has no tensord.nn counterpart"
    else:
        why = (f"{_qualname(cls)} is a Module subclass with its own forward(), which cannot be "
               "translated; write it with tensord.nn (the same attribute names) and load the "
               "weights with load_state_dict(torch_model.state_dict())")
    return NotImplementedError(
        f"tensord.nn.from_torch: cannot convert {_where(path)} ({cls.__name__}): {why}. "
        "from_torch converts torch.nn's built-in layers that tensord.nn has (Linear, Conv2d, "
        "BatchNorm2d, LayerNorm, MultiheadAttention, TransformerEncoderLayer, ...) and "
        "Sequential / ModuleList / ModuleDict trees of them")


class _TreeConverter:
    """The walk both directions share: containers rebuilt in the other library around their
    converted children, each module converted once (a shared module stays shared), anything
    else handed to `leaf`. Subclasses name the two sides' container classes and convert a
    leaf (`leaf(module, path)`)."""

    def __init__(self):
        self.memo = {}

    def containers(self):
        """((source class, target class) for Sequential, ModuleList, ModuleDict)."""
        raise NotImplementedError

    def convert(self, module, path: str):
        if module is None:
            return None
        if id(module) in self.memo:
            return self.memo[id(module)]
        (seq, new_seq), (lst, new_lst), (dct, new_dct) = self.containers()
        cls = type(module)
        if cls in (seq, lst, dct):
            children = [(name, self.convert(child, f"{path}.{name}" if path else name))
                        for name, child in module._modules.items()]
            if cls is seq:
                new = new_seq(OrderedDict(children))
            elif cls is lst:
                new = new_lst([child for _, child in children])
            else:
                new = new_dct(OrderedDict(children))
        else:
            new = self.leaf(module, path)
        self.memo[id(module)] = new
        return new


class _FromTorch(_TreeConverter):
    def __init__(self, session, device):
        super().__init__()
        self.session, self.device = session, device
        self.classes = _tensord_classes()

    def containers(self):
        import torch
        return ((torch.nn.Sequential, Sequential), (torch.nn.ModuleList, ModuleList),
                (torch.nn.ModuleDict, ModuleDict))

    def value(self, value):
        if dtypes.is_torch_tensor(value):
            return as_array(value)
        return value

    def leaf(self, module, path: str):
        cls = type(module)
        target = self.classes.get(cls.__name__)
        if target is None or not cls.__module__.startswith("torch.nn.modules."):
            raise _unsupported_torch(module, path)
        return self.layer(module, target, path)

    def factory(self, module, target) -> dict:
        params = inspect.signature(target.__init__).parameters
        kwargs = {}
        if "session" in params:
            kwargs["session"] = self.session
        if "device" in params and self.device is not None:
            kwargs["device"] = self.device
        if "dtype" in params:
            dt = _first_float_dtype(list(module.parameters()) + list(module.buffers()))
            if dt is not None:
                kwargs["dtype"] = str(dt)
        return kwargs

    def layer(self, module, target, path: str):
        name = type(module).__name__
        specials = {}
        if name == "MultiheadAttention":
            specials["add_bias_kv"] = module.bias_k is not None
        elif name in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
            specials = self.encoder_layer_args(module, path)
        elif name in ("TransformerEncoder", "TransformerDecoder"):
            return self.encoder(module, target, path)
        elif name == "Transformer":
            return self.transformer(module, target, path)
        if name in _RECURRENT:
            kwargs = _recurrent_args(module)
            kwargs.update(self.factory(module, RNNBase))
        else:
            kwargs = _constructor_args(target, module, specials, self.value)
            kwargs.update(self.factory(module, target))
        try:
            new = target(**kwargs)
        except (NotImplementedError, ValueError, AssertionError, TypeError) as exc:
            raise NotImplementedError(f"tensord.nn.from_torch: cannot convert {_where(path)} "
                                      f"({name}): {exc}") from exc
        _replace_attention(self, module, new, path)
        return new

    def encoder_layer_args(self, module, path: str) -> dict:
        import torch
        activation = module.activation
        if isinstance(activation, torch.nn.Module):  # ReLU(), GELU(): a child, converted
            activation = self.convert(activation, f"{path}.activation" if path else "activation")
        elif getattr(activation, "__name__", None) in ("relu", "gelu"):
            activation = activation.__name__
        else:
            raise NotImplementedError(
                f"tensord.nn.from_torch: cannot convert {_where(path)} "
                f"({type(module).__name__}): its activation {activation!r} is not relu or gelu")
        return {"d_model": module.self_attn.embed_dim, "nhead": module.self_attn.num_heads,
                "dim_feedforward": module.linear1.out_features, "dropout": module.dropout.p,
                "activation": activation, "layer_norm_eps": module.norm1.eps,
                "batch_first": module.self_attn.batch_first, "norm_first": module.norm_first,
                "bias": module.linear1.bias is not None}

    def encoder(self, module, target, path: str):
        """TransformerEncoder / TransformerDecoder: the converted layers (each its own, as the
        torch stack's deep copies are), not copies of the first."""
        layers = [self.convert(layer, f"{path}.layers.{i}" if path else f"layers.{i}")
                  for i, layer in enumerate(module.layers)]
        norm = self.convert(module.norm, f"{path}.norm" if path else "norm")
        if type(module).__name__ == "TransformerDecoder":
            new = target(layers[0], 0, norm=norm)
        else:
            new = target(layers[0], 0, norm=norm,
                         enable_nested_tensor=getattr(module, "enable_nested_tensor", True),
                         mask_check=getattr(module, "mask_check", True))
        new.layers = ModuleList(layers)
        new.num_layers = len(layers)
        return new

    def transformer(self, module, target, path: str):
        """Transformer: its encoder and decoder converted, given as custom_encoder /
        custom_decoder (their initial draws are then overwritten by load_state_dict)."""
        encoder = self.convert(module.encoder, f"{path}.encoder" if path else "encoder")
        decoder = self.convert(module.decoder, f"{path}.decoder" if path else "decoder")
        return target(module.d_model, module.nhead, custom_encoder=encoder,
                      custom_decoder=decoder, batch_first=module.batch_first,
                      **self.factory(module, target))


def from_torch(module, session=None, *, device=None) -> Module:
    """The tensord.nn equivalent of a torch.nn model: the same tree (names, state_dict keys,
    reprs), each layer built with the torch layer's arguments and dtype, its parameters and
    buffers (BatchNorm's running statistics, num_batches_tracked) copied, training flags and
    frozen parameters (requires_grad=False) kept. `session=` (else the default one) holds the
    tensors; `device=` places them. Converts torch.nn's layers that tensord.nn has, and
    Sequential / ModuleList / ModuleDict trees of them; anything else (a torch.nn layer tensord
    lacks, a Module subclass with its own forward) raises NotImplementedError naming the layer
    and where it is."""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"tensord.nn.from_torch takes a torch.nn.Module, not "
                        f"{type(module).__name__}")
    sess = session or defaults.get_session(required=True, what="tensord.nn.from_torch")
    new = _FromTorch(sess, device).convert(module, "")
    new.load_state_dict(module.state_dict())
    _copy_flags(module, new)
    return new


# -- tensord -> torch ---------------------------------------------------------------------------
def _torch_class(cls):
    import torch
    if cls.__name__ == "NonDynamicallyQuantizableLinear":
        return torch.nn.modules.linear.NonDynamicallyQuantizableLinear
    found = getattr(torch.nn, cls.__name__, None)
    return found if isinstance(found, type) and issubclass(found, torch.nn.Module) else None


def _unsupported_tensord(module, path: str, why: str | None = None) -> Exception:
    cls = type(module)
    if why is None:
        why = (f"{_qualname(cls)} is a Module subclass with its own forward(), which cannot be "
               "translated; write it with torch.nn (the same attribute names) and load "
               "nn.to_torch_state_dict(model.state_dict())") \
            if not cls.__module__.startswith("tensord.nn.") else \
            f"torch.nn has no {cls.__name__}"
    return NotImplementedError(
        f"tensord: to_torch cannot convert {_where(path)} ({cls.__name__}): {why}. to_torch "
        "converts tensord.nn's layers and Sequential / ModuleList / ModuleDict trees of them")


class _ToTorch(_TreeConverter):
    def containers(self):
        import torch
        return ((Sequential, torch.nn.Sequential), (ModuleList, torch.nn.ModuleList),
                (ModuleDict, torch.nn.ModuleDict))

    @staticmethod
    def value(value):
        return value.torch() if isinstance(value, Tensor) else value

    def leaf(self, module, path: str):
        cls = type(module)
        target = _torch_class(cls) if cls.__module__.startswith("tensord.nn.") else None
        if target is None:
            raise _unsupported_tensord(module, path)
        return self.layer(module, target, path)

    def layer(self, module, target, path: str):
        import torch
        name = type(module).__name__
        specials = {}
        if name == "MultiheadAttention":
            specials["add_bias_kv"] = module.bias_k is not None
        elif name in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
            specials = self.encoder_layer_args(module, path)
        elif name in ("TransformerEncoder", "TransformerDecoder"):
            layers = [self.convert(layer, f"{path}.layers.{i}" if path else f"layers.{i}")
                      for i, layer in enumerate(module.layers)]
            norm = self.convert(module.norm, f"{path}.norm" if path else "norm")
            extra = {"enable_nested_tensor": module.enable_nested_tensor} \
                if name == "TransformerEncoder" else {}
            new = target(layers[0], len(layers), norm=norm, **extra)
            new.layers = torch.nn.ModuleList(layers)
            return new
        elif name == "Transformer":
            encoder = self.convert(module.encoder, f"{path}.encoder" if path else "encoder")
            decoder = self.convert(module.decoder, f"{path}.decoder" if path else "decoder")
            dt = _first_float_dtype(list(module.parameters()))
            new = target(module.d_model, module.nhead, custom_encoder=encoder,
                         custom_decoder=decoder, batch_first=module.batch_first,
                         **({"dtype": dtypes.torch_dtype(dt)} if dt is not None else {}))
            return new
        params = inspect.signature(target.__init__).parameters
        if specials.get("bias") is False and "bias" not in params:
            raise _unsupported_tensord(module, path, f"torch.nn.{target.__name__} of this "
                                       "torch has no bias argument")
        kwargs = _recurrent_args(module) if name in _RECURRENT else \
            _constructor_args(target, module, specials, self.value)
        if "dtype" in params or name in _RECURRENT:
            dt = _first_float_dtype(list(module.parameters()) + [
                b for b in module.buffers() if isinstance(b, Tensor)])
            if dt is not None:
                kwargs["dtype"] = dtypes.torch_dtype(dt)
        try:
            new = target(**kwargs)
        except (ValueError, AssertionError, TypeError) as exc:
            raise _unsupported_tensord(module, path, f"torch.nn.{target.__name__}"
                                       f"(**{kwargs!r}) failed: {exc}") from exc
        _replace_attention(self, module, new, path)
        own = [k for k in module.state_dict() if "." not in k]
        theirs = [k for k in new.state_dict() if "." not in k]
        if sorted(own) != sorted(theirs):  # e.g. LayerNorm(bias=False) on a torch without it
            raise _unsupported_tensord(module, path, f"torch.nn.{target.__name__} of this torch "
                                       f"has the state {theirs}, this layer {own}")
        return new

    def encoder_layer_args(self, module, path: str) -> dict:
        from . import functional as F
        activation = module.activation
        if isinstance(activation, Module):
            activation = self.convert(activation, f"{path}.activation" if path else "activation")
        elif activation is F.relu or activation is F.gelu:
            activation = activation.__name__
        else:
            raise _unsupported_tensord(module, path, f"its activation {activation!r} is not "
                                       "relu or gelu")
        args = {"d_model": module.self_attn.embed_dim, "nhead": module.self_attn.num_heads,
                "dim_feedforward": module.linear1.out_features, "dropout": module.dropout.p,
                "activation": activation, "layer_norm_eps": module.norm1.eps,
                "batch_first": module.self_attn.batch_first, "norm_first": module.norm_first}
        if module.linear1.bias is None:
            args["bias"] = False
        return args


def to_torch(module: Module):
    """The torch.nn equivalent of a tensord.nn model (Module.to_torch())."""
    new = _ToTorch().convert(module, "")
    state = OrderedDict()
    for name, value in module.state_dict(keep_vars=True).items():
        state[name] = value.torch() if isinstance(value, Tensor) else \
            __import__("torch").from_numpy(np.array(value, copy=True))
    new.load_state_dict(state)
    _copy_flags(module, new)
    return new


__all__ = ["from_torch", "to_torch"]
