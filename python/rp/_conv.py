"""ATen's convolution as rp ops: rp has no convolution op, so a forward
convolution becomes patches and an rp.matmul with the flattened weight,
which the training graph differentiates like any other matmul (slices,
concats and transposes have their own VJPs).

Two forms:

* a patch embedding (stride equal to the kernel, no padding, dilation 1,
  one group; a ViT's conv_proj): the input is cut into non-overlapping
  patches by a reshape and a transpose alone;
* any other convolution of any rank (stride, padding, dilation, groups):
  im2col, one strided rp.slice of the zero-padded input per kernel offset,
  concatenated, then one batched rp.matmul per group.

A transposed convolution (nn.ConvTranspose*) is an error that names the
attribute.
"""

from __future__ import annotations

import itertools
import math

from rp._aten_movement import _permute_to, _reshape_text, _slice_text
from rp._irtext import (TraceError, _elem, _fmt_scalar, _innermost,
                        _qualname, _ttype, _UNSUPPORTED)


def convolution(e, n):
    x, w, bias, stride, padding, dilation, transposed, _, groups = n.args[:9]
    xs, ws = list(e.values[x].shape), list(e.values[w].shape)
    k = len(ws) - 2
    if transposed:
        raise TraceError(
            f"rp.trace: unsupported form of {_qualname(n)} in {e.where(n)}: "
            f"transposed = True (a transposed convolution, "
            f"nn.ConvTranspose{k}d); rp maps forward convolutions only "
            f"(any stride, padding, dilation and groups)",
            op=_qualname(n), module_path=_innermost(n))
    if k < 1 or len(xs) != k + 2:
        return _UNSUPPORTED
    if (groups == 1 and list(stride) == ws[2:] and
            all(p == 0 for p in padding) and all(d == 1 for d in dilation)):
        return _patches(e, n, x, w, bias)
    return _im2col(e, n, x, w, bias, list(stride), list(padding),
                   list(dilation), groups)


def _add_channel_bias(e, m, bias, k, dt):
    """Adds a [O] bias to a [B, O, S1.., Sk] result."""
    if bias is None:
        return m
    bv = e.val(bias, dt)
    o = e.values[bias].shape[0]
    bv = _reshape_text(e, bv, _ttype([o] + [1] * k, dt))
    ty = e.ty(m)
    return e.emit(f"rp.add {m}, {bv} : ({ty}, {e.ty(bv)}) -> {ty}", ty)


def _patches(e, n, x, w, bias):
    """The image [B, C, S1.., Sk] cut into patches, [B, P1.., Pk,
    C*K1..*Kk] (reshape, transpose), times the [O, C*K1..*Kk] weight
    (transpose_b) plus the bias gives [B, P1.., Pk, O], transposed to
    [B, O, P1.., Pk]. Trailing rows and columns no patch covers are sliced
    off first, as ATen ignores them."""
    xs, ws = list(e.values[x].shape), list(e.values[w].shape)
    k = len(ws) - 2
    kernel = ws[2:]
    dt = e.values[n].dtype
    b, c, o = xs[0], xs[1], ws[0]
    patches = [s // kk for s, kk in zip(xs[2:], kernel)]
    xv = e.val(x)
    used = [b, c] + [p * kk for p, kk in zip(patches, kernel)]
    if used != xs:
        xv = _slice_text(e, xv, [0] * len(xs), [1] * len(xs), _ttype(used, dt))
    split = [b, c]
    for p, kk in zip(patches, kernel):
        split += [p, kk]
    xv = _reshape_text(e, xv, _ttype(split, dt))
    # [B, C, P1, K1, .., Pk, Kk] -> [B, P1.., Pk, C, K1.., Kk]
    perm = [0] + [2 + 2 * i for i in range(k)] + [1] + \
        [3 + 2 * i for i in range(k)]
    xv = _permute_to(e, xv, perm, _ttype([split[i] for i in perm], dt))
    flat = math.prod(ws[1:])
    xv = _reshape_text(e, xv, _ttype([b] + patches + [flat], dt))
    wv = _reshape_text(e, e.val(w), _ttype([o, flat], dt))
    mty = _ttype([b] + patches + [o], dt)
    m = e.emit(f"rp.matmul {xv}, {wv} transpose_b : ({e.ty(xv)}, {e.ty(wv)}) "
               f"-> {mty}", mty)
    if bias is not None:
        bv = e.val(bias, dt)
        m = e.emit(f"rp.add {m}, {bv} : ({mty}, {e.ty(bv)}) -> {mty}", mty)
    return _permute_to(e, m, [0, k + 1] + list(range(1, k + 1)), e.out_type(n))


def _im2col(e, n, x, w, bias, stride, padding, dilation, groups):
    """[B, C, S1.., Sk] is zero-padded (concatenated zero blocks), and for
    every kernel offset (j1.., jk) the strided slice starting at
    (j1*d1.., jk*dk) with the convolution's stride gives the input each
    output position sees through that kernel element: [B, C, Q1.., Qk].
    The K = K1*..*Kk slices stacked on a new dim 2 are the columns
    [B, C, K, Q1.., Qk]; as [B, G, L, C/G*K] (L = Q1*..*Qk) they meet the
    weight [O, C/G, K1.., Kk] as [G, O/G, C/G*K] in one rp.matmul
    (transpose_b, batched over the G groups), giving [B, G, L, O/G],
    transposed and reshaped to [B, O, Q1.., Qk]. The channel order C/G
    then K matches the weight's layout, and the kernel offsets are
    enumerated in the weight's row-major order."""
    xs, ws = list(e.values[x].shape), list(e.values[w].shape)
    k = len(ws) - 2
    kernel = ws[2:]
    dt = e.values[n].dtype
    elem = _elem(dt)
    b, c, o = xs[0], xs[1], ws[0]
    cg, og = c // groups, o // groups
    xv = e.val(x)
    cur = list(xs)
    for d, p in enumerate(padding):
        if p == 0:
            continue
        zshape = list(cur)
        zshape[2 + d] = p
        zty = _ttype(zshape, dt)
        z = e.emit(f"rp.constant dense<{_fmt_scalar(0, elem)}> : {zty}", zty)
        cur[2 + d] += 2 * p
        ty = _ttype(cur, dt)
        xv = e.emit(f"rp.concat {z}, {xv}, {z} dim = {2 + d} : ({zty}, "
                    f"{e.ty(xv)}, {zty}) -> {ty}", ty)
    out = [(cur[2 + d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
           for d in range(k)]
    if list(e.values[n].shape) != [b, o] + out:
        raise TraceError(f"rp.trace: internal error: convolution in "
                         f"{e.where(n)} computed shape {[b, o] + out}, ATen "
                         f"{list(e.values[n].shape)}")
    kk = math.prod(kernel)
    piece_ty = _ttype([b, c, 1] + out, dt)
    pieces = []
    for offset in itertools.product(*[range(s) for s in kernel]):
        start = [0, 0] + [j * dl for j, dl in zip(offset, dilation)]
        s = _slice_text(e, xv, start, [1, 1] + stride,
                        _ttype([b, c] + out, dt))
        pieces.append(_reshape_text(e, s, piece_ty))
    cols_ty = _ttype([b, c, kk] + out, dt)
    if len(pieces) == 1:
        cols = _reshape_text(e, pieces[0], cols_ty)
    else:
        cols = e.emit(f"rp.concat {', '.join(pieces)} dim = 2 : "
                      f"({', '.join([piece_ty] * len(pieces))}) -> {cols_ty}",
                      cols_ty)
    # One group drops the group dimension so that the weight is a plain
    # [O, C*K] matrix, as for a linear layer.
    g = [groups] if groups > 1 else []
    length = math.prod(out)
    cols = _reshape_text(e, cols, _ttype([b] + g + [cg, kk, length], dt))
    gd = len(g)
    perm = list(range(1 + gd)) + [3 + gd, 1 + gd, 2 + gd]
    cols = _permute_to(e, cols, perm, _ttype([b] + g + [length, cg, kk], dt))
    cols = _reshape_text(e, cols, _ttype([b] + g + [length, cg * kk], dt))
    wv = _reshape_text(e, e.val(w), _ttype(g + [og, cg * kk], dt))
    mty = _ttype([b] + g + [length, og], dt)
    m = e.emit(f"rp.matmul {cols}, {wv} transpose_b : ({e.ty(cols)}, "
               f"{e.ty(wv)}) -> {mty}", mty)
    m = _permute_to(e, m, list(range(1 + gd)) + [2 + gd, 1 + gd],
                    _ttype([b] + g + [og, length], dt))
    m = _reshape_text(e, m, e.out_type(n))
    return _add_channel_bias(e, m, bias, k, dt)


HANDLERS = {"convolution": convolution}
