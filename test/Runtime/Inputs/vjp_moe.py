"""The VJP rules of the rp.moe ops against PyTorch autograd in float64.

Usage: vjp_moe.py RP_COMPILE RP_RUN WORK_DIR

Same harness as vjp_ops.py (one-layer model, loss = sum(out * R), gradients
from rp-run --dump-grads against torch.autograd): the router in its three
forms (softmax before the top-k with and without renormalisation, softmax
after it), routers whose scores tie (the chosen experts and their order
must be PyTorch's CPU topk's, or the gradients land on other logits), and
whole SwiGLU expert blocks through dispatch, grouped matmuls (both weight
layouts, an expert with no tokens) and the weighted and unweighted combine.
"""

import sys

import numpy as np
import torch
import torch.nn.functional as F

from vjp_ops import main as run_cases
import vjp_ops


def route_before(normalize, k):
    def fn(a):
        v, _ = a.softmax(-1).topk(k, -1)
        return v / v.sum(-1, keepdim=True) if normalize else v
    return fn


def route_after(k):
    def fn(a):
        v, _ = a.topk(k, -1)
        return v.softmax(-1)
    return fn


def route_body(k, softmax, normalize, tokens):
    flag = " normalize" if normalize else ""
    return (f"%o, %ex = rp.moe.route %a top_k = {k} softmax = {softmax}{flag} "
            f": {{A}} -> ({{O}}, tensor<{tokens}x{k}xi64>)")


# Scores with ties: torch's CPU topk orders equal values by its selection
# algorithm, not by index (nth_element when k * 64 > E, partial_sort else).
TIES = np.array([[1, 3, 3, 2, 3, 0, 3, 1], [0] * 8,
                 [2, 2, 1, 2, 2, 2, 0, 2]], np.float32)
WIDE_TIES = np.zeros((2, 128), np.float32)
WIDE_TIES[1, 5::7] = 1.0

T, H, E, K, F_ = 6, 4, 3, 2, 5


def swiglu_ref(x, gate, w1, w3, w2):
    v, idx = (x @ gate.t()).softmax(-1).topk(K, -1)
    v = v / v.sum(-1, keepdim=True)
    out = []
    for t in range(x.shape[0]):
        acc = 0
        for j in range(K):
            e = int(idx[t, j])
            h = F.silu(x[t] @ w1[e].t()) * (x[t] @ w3[e].t())
            acc = acc + v[t, j] * (h @ w2[e].t())
        out.append(acc)
    return torch.stack(out)


SWIGLU = f"""%lg = rp.matmul %a, %b transpose_b : ({{A}}, {{B}}) -> tensor<{T}x{E}xf32>
    %wt, %ex = rp.moe.route %lg top_k = {K} softmax = before normalize : tensor<{T}x{E}xf32> -> (tensor<{T}x{K}xf32>, tensor<{T}x{K}xi64>)
    %rows, %pos, %cnt = rp.moe.dispatch %a, %ex : ({{A}}, tensor<{T}x{K}xi64>) -> (tensor<{T*K}x{H}xf32>, tensor<{T}x{K}xi32>, tensor<{E}xi32>)
    %g = rp.moe.grouped_matmul %rows, %c, %cnt transpose_b : (tensor<{T*K}x{H}xf32>, {{C}}, tensor<{E}xi32>) -> tensor<{T*K}x{F_}xf32>
    %u = rp.moe.grouped_matmul %rows, %d, %cnt transpose_b : (tensor<{T*K}x{H}xf32>, {{D}}, tensor<{E}xi32>) -> tensor<{T*K}x{F_}xf32>
    %sg = rp.silu %g : tensor<{T*K}x{F_}xf32>
    %h = rp.mul %sg, %u : (tensor<{T*K}x{F_}xf32>, tensor<{T*K}x{F_}xf32>) -> tensor<{T*K}x{F_}xf32>
    %y = rp.moe.grouped_matmul %h, %f, %cnt transpose_b : (tensor<{T*K}x{F_}xf32>, {{F}}, tensor<{E}xi32>) -> tensor<{T*K}x{H}xf32>
    %o = rp.moe.combine %y, %pos weights(%wt) : (tensor<{T*K}x{H}xf32>, tensor<{T}x{K}xi32>, tensor<{T}x{K}xf32>) -> {{O}}"""

# Fixed routing over 4 experts, expert 2 chosen by no token.
FIXED = [[0, 1], [1, 3], [0, 3], [3, 1], [1, 0], [0, 1]]
PLAIN = f"""%ex = rp.constant dense<{FIXED}> : tensor<6x2xi64>
    %rows, %pos, %cnt = rp.moe.dispatch %a, %ex : ({{A}}, tensor<6x2xi64>) -> (tensor<12x4xf32>, tensor<6x2xi32>, tensor<4xi32>)
    %y = rp.moe.grouped_matmul %rows, %b, %cnt : (tensor<12x4xf32>, {{B}}, tensor<4xi32>) -> tensor<12x5xf32>
    %o = rp.moe.combine %y, %pos : (tensor<12x5xf32>, tensor<6x2xi32>) -> {{O}}"""


def plain_ref(x, w):
    return torch.stack([sum(x[t] @ w[e] for e in FIXED[t])
                        for t in range(x.shape[0])])


CASES = {
    "moe_route_before_normalize": (
        {"a": ((6, 5), -2, 2)}, (6, 2), route_body(2, "before", True, 6),
        route_before(True, 2)),
    "moe_route_before": (
        {"a": ((6, 8), -2, 2)}, (6, 3), route_body(3, "before", False, 6),
        route_before(False, 3)),
    "moe_route_after": (
        {"a": ((6, 5), -2, 2)}, (6, 2), route_body(2, "after", False, 6),
        route_after(2)),
    "moe_route_ties": (
        {"a": TIES}, (3, 3), route_body(3, "before", True, 3),
        route_before(True, 3)),
    "moe_route_ties_after": (
        {"a": TIES}, (3, 3), route_body(3, "after", False, 3), route_after(3)),
    "moe_route_wide_ties": (
        {"a": WIDE_TIES}, (2, 2), route_body(2, "before", True, 2),
        route_before(True, 2)),
    "moe_swiglu_block": (
        {"a": ((T, H), -1, 1), "b": ((E, H), -1, 1), "c": ((E, F_, H), -1, 1),
         "d": ((E, F_, H), -1, 1), "f": ((E, H, F_), -1, 1)}, (T, H), SWIGLU,
        swiglu_ref),
    "moe_plain_unweighted": (
        {"a": ((6, 4), -1, 1), "b": ((4, 4, 5), -1, 1)}, (6, 5), PLAIN,
        plain_ref),
}

if __name__ == "__main__":
    vjp_ops.CASES = CASES
    sys.exit(run_cases(*sys.argv[1:4]))
