"""Every VJP rule against PyTorch autograd in float64.

Usage: vjp_ops.py RP_COMPILE RP_RUN WORK_DIR

For each op, writes a one-layer model computing loss = sum(op(inputs) * R)
with R a fixed random tensor (so the op's output gradient is R, not ones),
its inputs as trainable f32 parameters in a weights file; compiles it with
--loss output:loss (rp-attach-loss, rp-autodiff), runs one step with
--dump-grads, and compares every input gradient with torch.autograd on the
same values in float64 (per tensor ||a - b|| / ||ref|| <= 1e-5, rp computing
in f32). Prints one line per op; exits 1 when one fails.
"""

import os
import subprocess
import sys
import zlib

import numpy as np
from rp import safetensors as rp_safetensors
import torch
import torch.nn.functional as F

TOL = 1e-5


def t(shape, dtype="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def gather_ids():
    return np.array([[2, 0, 2], [1, 3, 3]], np.int64)


# name: (inputs {name: (shape, low, high)}, out shape, rp body (uses %a, %b,
# %c for the inputs' block arguments; defines %o), torch function)
CASES = {
    "add": ({"a": ((3, 4), -1, 1), "b": ((4,), -1, 1)}, (3, 4),
            "%o = rp.add %a, %b : ({A}, {B}) -> {O}", lambda a, b: a + b),
    "sub": ({"a": ((3, 1), -1, 1), "b": ((2, 3, 4), -1, 1)}, (2, 3, 4),
            "%o = rp.sub %a, %b : ({A}, {B}) -> {O}", lambda a, b: a - b),
    "mul": ({"a": ((3, 4), -1, 1), "b": ((3, 1), -1, 1)}, (3, 4),
            "%o = rp.mul %a, %b : ({A}, {B}) -> {O}", lambda a, b: a * b),
    "div": ({"a": ((3, 4), -1, 1), "b": ((4,), 0.5, 2)}, (3, 4),
            "%o = rp.div %a, %b : ({A}, {B}) -> {O}", lambda a, b: a / b),
    "pow": ({"a": ((3, 4), 0.5, 2), "b": ((4,), -1, 2)}, (3, 4),
            "%o = rp.pow %a, %b : ({A}, {B}) -> {O}", torch.pow),
    "max": ({"a": ((3, 4), -1, 1), "b": ((4,), -1, 1)}, (3, 4),
            "%o = rp.max %a, %b : ({A}, {B}) -> {O}", torch.maximum),
    "min": ({"a": ((3, 4), -1, 1), "b": ((3, 4), -1, 1)}, (3, 4),
            "%o = rp.min %a, %b : ({A}, {B}) -> {O}", torch.minimum),
    "neg": ({"a": ((5,), -1, 1)}, (5,), "%o = rp.neg %a : {A}", torch.neg),
    "exp": ({"a": ((5,), -1, 1)}, (5,), "%o = rp.exp %a : {A}", torch.exp),
    "log": ({"a": ((5,), 0.5, 2)}, (5,), "%o = rp.log %a : {A}", torch.log),
    "sqrt": ({"a": ((5,), 0.5, 2)}, (5,), "%o = rp.sqrt %a : {A}", torch.sqrt),
    "rsqrt": ({"a": ((5,), 0.5, 2)}, (5,), "%o = rp.rsqrt %a : {A}",
              torch.rsqrt),
    "tanh": ({"a": ((5,), -2, 2)}, (5,), "%o = rp.tanh %a : {A}", torch.tanh),
    "erf": ({"a": ((5,), -2, 2)}, (5,), "%o = rp.erf %a : {A}", torch.erf),
    "sigmoid": ({"a": ((5,), -3, 3)}, (5,), "%o = rp.sigmoid %a : {A}",
                torch.sigmoid),
    "silu": ({"a": ((5,), -3, 3)}, (5,), "%o = rp.silu %a : {A}", F.silu),
    "relu": ({"a": ((6,), -1, 1)}, (6,), "%o = rp.relu %a : {A}", F.relu),
    "gelu": ({"a": ((6,), -3, 3)}, (6,), "%o = rp.gelu %a : {A}", F.gelu),
    "gelu_tanh": ({"a": ((6,), -3, 3)}, (6,),
                  "%o = rp.gelu %a approximate = tanh : {A}",
                  lambda a: F.gelu(a, approximate="tanh")),
    "where": ({"a": ((2, 3), -1, 1), "b": ((3,), -1, 1)}, (2, 3),
              "%m = rp.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>\n"
              "    %o = rp.where %m, %a, %b : (tensor<2x3xi1>, {A}, {B}) -> {O}",
              lambda a, b: torch.where(
                  torch.tensor([[True, False, True], [False, False, True]]), a, b)),
    "reshape": ({"a": ((2, 6), -1, 1)}, (3, 4),
                "%o = rp.reshape %a : {A} to {O}", lambda a: a.reshape(3, 4)),
    "transpose": ({"a": ((2, 3, 4), -1, 1)}, (4, 2, 3),
                  "%o = rp.transpose %a permutation = [2, 0, 1] : {A} -> {O}",
                  lambda a: a.permute(2, 0, 1)),
    "slice": ({"a": ((4, 9), -1, 1)}, (2, 3),
              "%o = rp.slice %a offsets = [1, 2] strides = [2, 3] : {A} -> {O}",
              lambda a: a[1::2, 2::3]),
    "concat": ({"a": ((2, 3), -1, 1), "b": ((2, 2), -1, 1)}, (2, 5),
               "%o = rp.concat %a, %b dim = 1 : ({A}, {B}) -> {O}",
               lambda a, b: torch.cat([a, b], 1)),
    "broadcast": ({"a": ((1, 4), -1, 1)}, (3, 4),
                  "%o = rp.broadcast %a : {A} to {O}",
                  lambda a: a.expand(3, 4)),
    "gather": ({"a": ((4, 5), -1, 1)}, (2, 3, 5),
               "%i = rp.constant dense<[[2, 0, 2], [1, 3, 3]]> : tensor<2x3xi64>\n"
               "    %o = rp.gather %a[%i] axis = 0 : ({A}, tensor<2x3xi64>) -> {O}",
               lambda a: a[torch.tensor(gather_ids())]),
    "matmul": ({"a": ((2, 3, 4), -1, 1), "b": ((5, 4), -1, 1)}, (2, 3, 5),
               "%o = rp.matmul %a, %b transpose_b : ({A}, {B}) -> {O}",
               lambda a, b: a @ b.t()),
    "matmul_batched": ({"a": ((2, 4, 3), -1, 1), "b": ((2, 4, 5), -1, 1)},
                       (2, 3, 5),
                       "%o = rp.matmul %a, %b transpose_a : ({A}, {B}) -> {O}",
                       lambda a, b: a.transpose(1, 2) @ b),
    "reduce_sum": ({"a": ((2, 3, 4), -1, 1)}, (2, 1, 1),
                   "%o = rp.reduce sum %a dims = [1, 2] keep_dims : {A} -> {O}",
                   lambda a: a.sum((1, 2), keepdim=True)),
    "reduce_mean": ({"a": ((2, 3, 4), -1, 1)}, (3,),
                    "%o = rp.reduce mean %a dims = [0, 2] : {A} -> {O}",
                    lambda a: a.mean((0, 2))),
    "reduce_max": ({"a": ((3, 4), -1, 1)}, (3,),
                   "%o = rp.reduce max %a dims = [1] : {A} -> {O}",
                   lambda a: a.amax(1)),
    "softmax": ({"a": ((3, 5), -2, 2)}, (3, 5),
                "%o = rp.softmax %a dim = 1 : {A}", lambda a: a.softmax(1)),
    "log_softmax": ({"a": ((3, 5), -2, 2)}, (3, 5),
                    "%o = rp.log_softmax %a dim = 0 : {A}",
                    lambda a: a.log_softmax(0)),
    "layer_norm": ({"a": ((2, 3, 8), -2, 2), "b": ((8,), 0.5, 1.5),
                    "c": ((8,), -1, 1)}, (2, 3, 8),
                   "%o = rp.layer_norm %a scale(%b) bias(%c) axis = 2 "
                   "epsilon = 1.0e-05 : ({A}, {B}, {C}) -> {O}",
                   lambda a, b, c: F.layer_norm(a, (8,), b, c, 1e-5)),
    "rms_norm": ({"a": ((2, 3, 8), -2, 2), "b": ((8,), 0.5, 1.5)}, (2, 3, 8),
                 "%o = rp.rms_norm %a scale(%b) axis = 2 epsilon = 1.0e-06 "
                 ": ({A}, {B}) -> {O}",
                 lambda a, b: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True)
                                              + 1e-6) * b),
    "attention": ({"a": ((1, 4, 6, 8), -1, 1), "b": ((1, 2, 6, 8), -1, 1),
                   "c": ((1, 2, 6, 8), -1, 1)}, (1, 4, 6, 8),
                  "%o = rp.attention %a, %b, %c causal : ({A}, {B}, {C}) -> {O}",
                  lambda q, k, v: torch.softmax(
                      (q @ k.repeat_interleave(2, 1).transpose(-1, -2)) / 8 ** 0.5
                      + torch.full((6, 6), float("-inf")).triu(1), -1)
                  @ v.repeat_interleave(2, 1)),
}


def run_case(name, case, rp_compile, rp_run, work):
    inputs, out_shape, body, fn = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    # An input is (shape, low, high) for uniform values, or fixed values.
    values = {k: np.asarray(spec, np.float32) if isinstance(spec, np.ndarray)
              else rng.uniform(spec[1], spec[2], spec[0]).astype(np.float32)
              for k, spec in inputs.items()}
    weight = rng.uniform(-1, 1, out_shape).astype(np.float32)
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    blobs, offsets, offset = [], {}, 0
    for k, v in list(values.items()) + [("r", weight)]:
        offsets[k] = offset
        blobs.append(v.tobytes())
        offset += v.nbytes
    open(os.path.join(d, "w.bin"), "wb").write(b"".join(blobs))
    names = list(values)
    types = {k.upper(): t(v.shape) for k, v in values.items()}
    types["O"] = t(out_shape)
    lines = ["func.func @main() -> (tensor<f32> {rp.name = \"loss\"}) {"]
    for k, v in values.items():
        lines.append(f'  %p{k} = rp.param "{k}" trainable at "w.bin"'
                     f'[{offsets[k]}] : {t(v.shape)}')
    lines.append(f'  %pr = rp.param "r" at "w.bin"[{offsets["r"]}] : '
                 f'{t(out_shape)}')
    args = ", ".join(f"%p{k}" for k in names) + ", %pr"
    arg_types = ", ".join(t(values[k].shape) for k in names) + \
        f", {t(out_shape)}"
    block = ", ".join(f"%{k}: {t(values[k].shape)}" for k in names) + \
        f", %r: {t(out_shape)}"
    dims = ", ".join(str(i) for i in range(len(out_shape)))
    lines += [
        f'  %l = rp.layer "op" ({args}) : ({arg_types}) -> tensor<f32> {{',
        f"  ^bb0({block}):",
        "    " + body.format(**types),
        f"    %w = rp.mul %o, %r : ({t(out_shape)}, {t(out_shape)}) -> "
        f"{t(out_shape)}",
        f"    %s = rp.reduce sum %w dims = [{dims}] : {t(out_shape)} -> "
        "tensor<f32>",
        "    rp.yield %s : tensor<f32>",
        "  }",
        "  return %l : tensor<f32>",
        "}",
    ]
    open(os.path.join(d, "model.mlir"), "w").write("\n".join(lines) + "\n")
    plan = os.path.join(d, "model.rpplan")
    subprocess.run([rp_compile, os.path.join(d, "model.mlir"), "-o", plan,
                    "--loss", "output:loss"], check=True, capture_output=True)
    subprocess.run([rp_run, plan, "--sync", "--dump-grads",
                    os.path.join(d, "g.safetensors")], check=True,
                   capture_output=True)
    got = rp_safetensors.read(os.path.join(d, "g.safetensors"))
    tensors = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
               for k, v in values.items()}
    out = fn(*[tensors[k] for k in names])
    (out * torch.tensor(weight, dtype=torch.float64)).sum().backward()
    worst = 0.0
    for k in names:
        ref = tensors[k].grad.numpy()
        if k not in got:
            return f"no gradient for input {k}"
        err = np.linalg.norm(got[k] - ref) / max(np.linalg.norm(ref), 1e-30)
        worst = max(worst, err)
    return worst


def main(rp_compile, rp_run, work):
    failed = 0
    for name, case in CASES.items():
        try:
            r = run_case(name, case, rp_compile, rp_run, work)
        except subprocess.CalledProcessError as e:
            r = f"tool failed: {e.stderr.decode(errors='replace').strip()}"
        if isinstance(r, str) or r > TOL:
            failed += 1
            print(f"MISMATCH {name}: {r}")
        else:
            print(f"ok {name}: {r:.1e}")
    print(f"vjp rules: {len(CASES) - failed} of {len(CASES)} match torch "
          f"float64 autograd within {TOL:g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
