"""A PyTorch interpreter of TensorFlow.js graph models (the corpus networks).

TfjsGraph(model_json, weights) runs the graph of a TF.js `graph-model` JSON
(modelTopology.node) with its weights as torch tensors: the trainable ones (conv
and matmul filters and biases, the per-channel Mul/Add constants of folded batch
norms) are nn.Parameters named by their TF names, the rest (shape constants,
scalar clip bounds) buffers. Activations keep TF's NHWC layout; each convolution
views them as NCHW, so every axis, padding and reshape means what TF says.

The op set is the one the corpus networks emotion, faceres-deep and posenet use;
any other op, attribute value or layout is an error naming the node, never a
guess. SAME padding is TF's (the odd pixel after, not before), fused ops are
applied in the order the node's fused_ops lists them.

Weights come from the package's manifest (load_manifest_weights) or from any
{name: tensor} mapping, e.g. a corpus safetensors file (read_safetensors).
"""
from __future__ import annotations

import base64
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfjs_to_safetensors  # noqa: E402  (the corpus's safetensors layout)

SUPPORTED = {"Const", "Placeholder", "Identity", "_FusedConv2D", "Conv2D",
             "DepthwiseConv2dNative", "FusedDepthwiseConv2dNative", "_FusedMatMul",
             "MaxPool", "Add", "AddV2", "Mul", "Minimum", "Maximum", "Relu", "Relu6",
             "Mean", "Softmax", "Sigmoid"}
# Ops whose second (and third) inputs are weights a fine-tune trains.
WEIGHT_OPS = {"_FusedConv2D", "Conv2D", "DepthwiseConv2dNative",
              "FusedDepthwiseConv2dNative", "_FusedMatMul"}
ELEMENTWISE_WEIGHT_OPS = {"Add", "AddV2", "Mul"}

ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
             "I32": torch.int32, "U8": torch.uint8}
TORCH_TO_ST = {v: k for k, v in ST_DTYPES.items()}


class GraphError(Exception):
    pass


def _s(attr, key):
    v = attr.get(key)
    return base64.b64decode(v["s"]).decode() if v and "s" in v else None


def _ints(attr, key):
    v = attr.get(key)
    return [int(i) for i in v["list"].get("i", [])] if v and "list" in v else None


def _fused(attr):
    v = attr.get("fused_ops")
    return [base64.b64decode(s).decode() for s in v["list"].get("s", [])] if v else []


def _src(name):
    """The producing node of an input reference ('node', 'node:1'); None for control
    dependencies ('^node'), which carry no value."""
    if name.startswith("^"):
        return None
    return name.split(":")[0]


def load_manifest_weights(models_dir: str, net: str) -> dict:
    """{TF name: tensor} of every tensor in NET.json's weight manifest (float32 and
    int32; quantized tensors are an error: the networks used here have none)."""
    out = {}
    for name, shape, dt, raw in tfjs_to_safetensors.read_manifest(models_dir, net):
        if dt not in ("F32", "I32"):
            raise GraphError(f"{net}: tensor '{name}' is stored as {dt} (quantized)")
        out[name] = torch.frombuffer(bytearray(raw), dtype=ST_DTYPES[dt]).reshape(shape).clone()
    return out


def read_safetensors(path: str) -> tuple[dict, dict]:
    """({name: tensor}, metadata) of a safetensors file, tensors in file order."""
    meta, raw = tfjs_to_safetensors.read_safetensors(path)
    out = {}
    for name, shape, dt, data in raw:
        dtype = ST_DTYPES.get(dt)
        if dtype is None:
            raise GraphError(f"{path}: tensor '{name}' has dtype {dt}")
        t = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(shape).clone()
    return out, meta


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The little-endian bytes of a tensor (BF16 as its 16-bit patterns)."""
    t = t.detach().contiguous().cpu()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()


def safetensors_bytes(tensors: dict, metadata: dict | None = None) -> bytes:
    """A safetensors file of {name: tensor} in the order given, laid out as
    scripts/tfjs_to_safetensors.py writes the corpus."""
    return tfjs_to_safetensors.safetensors_bytes(
        metadata, [(k, list(t.shape), TORCH_TO_ST[t.dtype], tensor_bytes(t))
                   for k, t in tensors.items()])


def write_safetensors(path: str, tensors: dict, metadata: dict | None = None) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))
    os.replace(tmp, path)


def _same_pad(size, k, stride, dil):
    """TF's SAME padding of one spatial axis: (before, after), the odd one after."""
    eff = (k - 1) * dil + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


class TfjsGraph(torch.nn.Module):
    def __init__(self, model_json: dict, weights: dict, name: str = "graph"):
        super().__init__()
        self.graph_name = name
        self.nodes = {n["name"]: n for n in model_json["modelTopology"]["node"]}
        for n in self.nodes.values():
            if n["op"] not in SUPPORTED:
                raise GraphError(f"{name}: node '{n['name']}' has op {n['op']}, which this "
                                 f"interpreter does not implement")
        self.inputs = [n["name"] for n in self.nodes.values() if n["op"] == "Placeholder"]
        self.outputs = self._outputs(model_json)
        self._shapes = {k: w.dim() for k, w in weights.items()}
        trainable = self._trainable_names()
        # One Parameter (or buffer) per Const, registered under an index; names maps back.
        self.names = []
        self.params = torch.nn.ParameterList()
        self.param_index = {}
        self.consts = {}
        for n in self.nodes.values():
            if n["op"] != "Const":
                continue
            if n["name"] not in weights:
                raise GraphError(f"{name}: Const '{n['name']}' has no weight")
            w = weights[n["name"]]
            if n["name"] in trainable and w.is_floating_point():
                self.param_index[n["name"]] = len(self.params)
                self.params.append(torch.nn.Parameter(w.detach().clone()))
                self.names.append(n["name"])
            else:   # a buffer, so that .to(dtype) converts the float ones with the rest
                self.register_buffer(f"const{len(self.consts)}", w.detach().clone())
                self.consts[n["name"]] = f"const{len(self.consts)}"
        self.order = self._topological()

    def _outputs(self, model_json):
        sig = (model_json.get("signature") or
               (model_json.get("userDefinedMetadata") or {}).get("signature") or {})
        outs = [_src(k) for k in (sig.get("outputs") or {})]
        if outs:
            return outs
        used = {_src(i) for n in self.nodes.values() for i in n.get("input", [])}
        return [k for k, n in self.nodes.items() if k not in used and n["op"] != "Const"]

    def _trainable_names(self):
        names = set()
        for n in self.nodes.values():
            ins = [_src(i) for i in n.get("input", [])]
            if n["op"] in WEIGHT_OPS:
                names.update(ins[1:])
            elif n["op"] in ELEMENTWISE_WEIGHT_OPS:
                names.update(i for i in ins if i in self.nodes and
                             self.nodes[i]["op"] == "Const")
        # Scalars (clip bounds, constant factors) are part of the graph's arithmetic, not
        # weights: they stay fixed.
        return {k for k in names if self._const_ndim(k) != 0}

    def _const_ndim(self, k):
        return self._shapes.get(k, -1)

    def _topological(self):
        order, state = [], {}
        for root in self.outputs:
            stack = [(root, False)]
            while stack:
                k, done = stack.pop()
                if done:
                    state[k] = 2
                    order.append(k)
                    continue
                if state.get(k):
                    continue
                if k not in self.nodes:
                    raise GraphError(f"{self.graph_name}: unknown node '{k}'")
                state[k] = 1
                stack.append((k, True))
                for i in self.nodes[k].get("input", []):
                    s = _src(i)
                    if s is not None and not state.get(s):
                        stack.append((s, False))
        return order

    def named_weights(self):
        """{TF name: tensor} of every floating-point Const, trained or not, in graph
        order: what a checkpoint of this network holds."""
        out = {}
        for k, n in self.nodes.items():
            if n["op"] != "Const":
                continue
            t = self.value(k)
            if t.is_floating_point():
                out[k] = t
        return out

    def value(self, k):
        if k in self.param_index:
            return self.params[self.param_index[k]]
        return getattr(self, self.consts[k])

    def forward(self, *xs):
        if len(xs) != len(self.inputs):
            raise GraphError(f"{self.graph_name}: {len(xs)} inputs, the graph has "
                             f"{len(self.inputs)}")
        vals = dict(zip(self.inputs, xs))
        for k in self.order:
            n = self.nodes[k]
            if n["op"] == "Placeholder":
                continue
            if n["op"] == "Const":
                vals[k] = self.value(k)
                continue
            args = [vals[_src(i)] for i in n.get("input", []) if _src(i) is not None]
            vals[k] = self._op(n, args)
        return [vals[o] for o in self.outputs]

    def _err(self, n, what):
        return GraphError(f"{self.graph_name}: node '{n['name']}' ({n['op']}): {what}")

    def _op(self, n, a):
        op, attr = n["op"], n.get("attr", {})
        if op == "Identity":
            return a[0]
        if op in ("Add", "AddV2"):
            return a[0] + a[1].to(a[0].dtype)
        if op == "Mul":
            return a[0] * a[1].to(a[0].dtype)
        if op == "Minimum":
            return torch.minimum(a[0], a[1].to(a[0].dtype))
        if op == "Maximum":
            return torch.maximum(a[0], a[1].to(a[0].dtype))
        if op == "Relu":
            return torch.relu(a[0])
        if op == "Relu6":
            return torch.clamp(a[0], 0, 6)
        if op == "Sigmoid":
            return torch.sigmoid(a[0])
        if op == "Softmax":
            return torch.softmax(a[0], dim=-1)
        if op == "Mean":
            axes = [int(i) for i in a[1].reshape(-1).tolist()]
            keep = bool(attr.get("keep_dims", {}).get("b", False))
            return a[0].mean(dim=axes, keepdim=keep)
        if op == "MaxPool":
            return self._maxpool(n, attr, a[0])
        if op == "_FusedMatMul":
            if attr.get("transpose_a", {}).get("b") or attr.get("transpose_b", {}).get("b"):
                raise self._err(n, "transposed operands are not implemented")
            return self._fused_tail(n, attr, a[0] @ a[1], a[2:])
        # Convolutions: NHWC activations, HWIO (HW C M for depthwise) filters.
        if _s(attr, "data_format") not in (None, "NHWC"):
            raise self._err(n, f"data_format {_s(attr, 'data_format')}")
        x, w = a[0], a[1]
        strides = _ints(attr, "strides") or [1, 1, 1, 1]
        dil = _ints(attr, "dilations") or [1, 1, 1, 1]
        if strides[0] != 1 or strides[3] != 1 or dil[0] != 1 or dil[3] != 1:
            raise self._err(n, f"strides {strides}, dilations {dil}")
        x = self._pad(n, attr, x, w.shape[0], w.shape[1], strides, dil, 0.0)
        xc = x.permute(0, 3, 1, 2)   # NCHW view of the NHWC tensor
        if op in ("Conv2D", "_FusedConv2D"):
            y = F.conv2d(xc, w.permute(3, 2, 0, 1), stride=strides[1:3], dilation=dil[1:3])
        else:
            c, m = w.shape[2], w.shape[3]
            y = F.conv2d(xc, w.permute(2, 3, 0, 1).reshape(c * m, 1, w.shape[0], w.shape[1]),
                         stride=strides[1:3], dilation=dil[1:3], groups=c)
        y = y.permute(0, 2, 3, 1)
        if op in ("Conv2D", "DepthwiseConv2dNative"):
            return y
        return self._fused_tail(n, attr, y, a[2:])

    def _pad(self, n, attr, x, kh, kw, strides, dil, fill):
        pad = _s(attr, "padding")
        if pad == "VALID":
            return x
        if pad != "SAME":
            raise self._err(n, f"padding {pad}")
        ph = _same_pad(x.shape[1], kh, strides[1], dil[1])
        pw = _same_pad(x.shape[2], kw, strides[2], dil[2])
        if ph == (0, 0) and pw == (0, 0):
            return x
        return F.pad(x, (0, 0, pw[0], pw[1], ph[0], ph[1]), value=fill)

    def _maxpool(self, n, attr, x):
        k = _ints(attr, "ksize")
        s = _ints(attr, "strides")
        if k[0] != 1 or k[3] != 1 or s[0] != 1 or s[3] != 1:
            raise self._err(n, f"ksize {k}, strides {s}")
        # SAME pads with -inf: a padded position never wins the max.
        x = self._pad(n, attr, x, k[1], k[2], s, [1, 1, 1, 1], float("-inf"))
        y = F.max_pool2d(x.permute(0, 3, 1, 2), kernel_size=k[1:3], stride=s[1:3])
        return y.permute(0, 2, 3, 1)

    def _fused_tail(self, n, attr, y, extra):
        ops = _fused(attr)
        num_args = int(attr.get("num_args", {}).get("i", len(extra)))
        if num_args != len(extra):
            raise self._err(n, f"num_args {num_args}, {len(extra)} extra inputs")
        for f in ops:
            if f == "BiasAdd":
                if not extra:
                    raise self._err(n, "BiasAdd without a bias input")
                y = y + extra[0]
            elif f == "Relu":
                y = torch.relu(y)
            elif f == "Relu6":
                y = torch.clamp(y, 0, 6)
            else:
                raise self._err(n, f"fused op {f}")
        if "BiasAdd" not in ops and extra:
            raise self._err(n, f"{len(extra)} extra inputs and no BiasAdd")
        return y


def load_graph(models_dir: str, net: str) -> TfjsGraph:
    """The network NET of a models/ directory of the TF.js package."""
    with open(os.path.join(models_dir, net + ".json"), encoding="utf-8") as f:
        model = json.load(f)
    return TfjsGraph(model, load_manifest_weights(models_dir, net), net)


def input_shape(model_json: dict, name: str) -> list:
    """The placeholder's NHWC shape (-1 for a free batch size)."""
    for n in model_json["modelTopology"]["node"]:
        if n["name"] == name:
            return [int(d["size"]) for d in n["attr"]["shape"]["shape"]["dim"]]
    raise GraphError(f"no input '{name}'")
