"""ATen's advanced indexing as rp ops: ``x[idx]``, ``x[:, :, idx]`` (one
index tensor, every other position ``None``) is an rp.gather along that
axis, whose VJP scatter-adds into the rows read (repeated indices
accumulate, as PyTorch's index backward). Whisper's learned positions
(``weight[position_ids]``) and Falcon's rotary slice take this form."""

from __future__ import annotations

from rp._irtext import _UNSUPPORTED


def _index(e, n):
    import torch
    x, indices = n.args[0], list(n.args[1])
    given = [i for i, t in enumerate(indices) if t is not None]
    if len(given) != 1:
        return _UNSUPPORTED
    axis = given[0]
    idx = indices[axis]
    if not isinstance(idx, torch.fx.Node) or \
            e.values[idx].dtype not in (torch.int64, torch.int32):
        return _UNSUPPORTED
    xv, iv = e.val(x), e.val(idx, torch.int64)
    ty = e.out_type(n)
    return e.emit(f"rp.gather {xv}[{iv}] axis = {axis} : ({e.ty(xv)}, "
                  f"{e.ty(iv)}) -> {ty}", ty)


HANDLERS = {"index": _index}
