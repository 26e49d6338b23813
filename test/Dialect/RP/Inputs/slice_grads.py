"""Gradients of a token-sliced model against the unsliced one's.

Usage: slice_grads.py RP_OPT MODEL.mlir SLICES [RP_OPT_PASS ...]

Runs `rp-opt MODEL --rp-attach-loss [passes] --rp-slice-tokens=slices=SLICES
--rp-autodiff` and evaluates the differentiated functions it prints in
float64 (torch as the kernels; the IR is read in its generic form): @main
once, and the slice functions as the sliced schedule runs them, forward in
slice order (each slice's own keys and values appended to the kept prefix
the later slices read), then backward last slice first (each slice's key
and value gradients taken from rows [o, o + s) of an accumulator the later
slices' prefix gradients were added to). Prints, per trainable parameter,
the relative L2 difference of the summed slice gradients from @main's, and
the same with the later slices' key/value gradients left out (a control
the check must fail). The evaluator knows the ops the models of
autodiff-token-slices.test use, and says so for any other.
"""

import ast
import re
import subprocess
import sys

import torch

TOL = 1e-9  # float64 throughout: only the summation order differs

OP = re.compile(r'^\s*(?:(%[\w]+)(?::(\d+))? = )?"([\w.]+)"\((.*?)\)'
                r'(?: <\{(.*?)\}>)?(?: \{[^}]*\})?( \(\{| : (.*))$')
TENSOR = re.compile(r"tensor<([^>]*)>")


def shape_of(text):
    dims = text.split("x")[:-1]
    return [int(d) for d in dims]


def types_after_arrow(sig):
    return [shape_of(t) for t in TENSOR.findall(sig.split("->", 1)[1])]


class Op:
    def __init__(self, results, n, name, operands, attrs):
        self.results, self.n, self.name = results, n, name
        self.operands = [o.strip() for o in operands.split(",") if o.strip()]
        self.attrs = attrs or ""
        self.types = []
        self.body = None  # (block arguments, ops)

    def flag(self, key):
        return re.search(r"(^|, )" + key + r"(,|$)", self.attrs) is not None

    def int(self, key, default=None):
        m = re.search(key + r" = (-?\d+) : i\d+", self.attrs)
        return int(m.group(1)) if m else default

    def float(self, key):
        m = re.search(key + r" = ([-\d.e+]+) : f64", self.attrs)
        return float(m.group(1)) if m else None

    def results_named(self):
        """The names its results go by in an environment."""
        if self.n == 1:
            return [self.results]
        return [f"{self.results}#{j}" for j in range(self.n)]

    def str_attr(self, key):
        m = re.search(r"(?:^|, )" + key + r' = "([^"]*)"', self.attrs)
        return m.group(1) if m else None

    def array(self, key):
        m = re.search(key + r" = array<i64(?:: ([-\d, ]*))?>", self.attrs)
        return [int(x) for x in m.group(1).split(",")] if m and m.group(1) \
            else []


def parse(lines, i):
    """Ops from lines[i] to the end of their block; returns (ops, next)."""
    ops = []
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("})") or line.strip() == "}":
            return ops, i
        m = OP.match(line)
        if not m:
            i += 1
            continue
        res, n, name, operands, attrs, tail, sig = m.groups()
        op = Op(res, int(n) if n else 1, name, operands, attrs)
        if tail == " ({":
            args = re.findall(r"(%\w+): ", lines[i + 1])
            body, i = parse(lines, i + 2)
            op.body = (args, body)
            sig = lines[i].split(" : ", 1)[1] if " : " in lines[i] else ""
        if sig and "->" in sig:
            op.types = types_after_arrow(sig)
        ops.append(op)
        i += 1
    return ops, i


def functions(text):
    """Per function: argument names, their SSA names and shapes, result
    names, ops."""
    lines = text.splitlines()
    funcs = {}
    for i, line in enumerate(lines):
        if '"func.func"' not in line:
            continue
        name = re.search(r'sym_name = "([^"]+)"', line).group(1)
        seg = lambda key: re.search(key + r" = \[(.*?)\](, \w+ =|\}>)", line)
        arg_names = re.findall(r'rp.name = "([^"]*)"', seg("arg_attrs").group(1))
        res_names = re.findall(r'rp.name = "([^"]*)"', seg("res_attrs").group(1))
        block = re.findall(r"(%\w+): tensor<([^>]*)>", lines[i + 1])
        ops, _ = parse(lines, i + 2)
        funcs[name] = {"arg_names": arg_names, "args": [a for a, _ in block],
                       "shapes": [shape_of(t) for _, t in block],
                       "res_names": res_names, "ops": ops}
    return funcs

def dense(attrs, shape, dtype):
    m = re.search(r"value = dense<(.*)> : tensor", attrs)
    body = m.group(1)
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        t = torch.frombuffer(bytearray(raw), dtype={
            torch.float64: torch.float32, torch.int64: torch.int64}[dtype])
        return t.to(dtype).reshape(shape)
    v = torch.tensor(ast.literal_eval(body), dtype=dtype)
    return v.expand(shape).clone() if v.dim() == 0 else v.reshape(shape)


def attention(q, k, v, causal, window, scale):
    hq, hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hk, dim=1)
    v = v.repeat_interleave(hq // hk, dim=1)
    s = (q @ k.transpose(-1, -2)) * scale
    S, T = q.shape[2], k.shape[2]
    pos = torch.arange(S).unsqueeze(1) + (T - S)
    key = torch.arange(T).unsqueeze(0)
    drop = torch.zeros(S, T, dtype=torch.bool)
    if causal:
        drop |= key > pos
        if window:
            drop |= key <= pos - window
    s = s.masked_fill(drop, float("-inf"))
    return torch.softmax(s, -1) @ v


def matmul(a, b, ta, tb):
    if ta:
        a = a.transpose(-1, -2)
    if tb:
        b = b.transpose(-1, -2)
    return a @ b


def cross_entropy(logits, labels, ignore):
    keep = labels != ignore
    lp = torch.log_softmax(logits, -1)
    picked = lp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum(), keep.sum()


def run_op(op, x):
    """The results of `op` given its operands' values `x`."""
    n, a = op.name, op.attrs
    if n == "rp.add":
        return [x[0] + x[1]]
    if n == "rp.sub":
        return [x[0] - x[1]]
    if n == "rp.mul":
        return [x[0] * x[1]]
    if n == "rp.neg":
        return [-x[0]]
    if n == "rp.matmul":
        return [matmul(x[0], x[1], op.flag("transpose_a"),
                       op.flag("transpose_b"))]
    if n == "rp.reshape":
        return [x[0].reshape(op.types[0])]
    if n == "rp.transpose":
        return [x[0].permute(op.array("permutation"))]
    if n == "rp.concat":
        return [torch.cat(x, dim=op.int("dim"))]
    if n == "rp.slice":
        offs, strides = op.array("offsets"), op.array("strides")
        idx = tuple(slice(o, o + d * s, s)
                    for o, d, s in zip(offs, op.types[0], strides))
        return [x[0][idx]]
    if n == "rp.gather":
        assert op.int("axis") == 0
        return [x[0][x[1]]]
    if n == "rp.gather_grad":
        assert op.int("axis") == 0
        out = torch.zeros(op.types[0], dtype=torch.float64)
        rows = x[1].reshape(-1, *op.types[0][1:])
        out.index_add_(0, x[0].reshape(-1), rows)
        return [out]
    if n == "rp.reduce":
        assert op.int("kind") == 0, "only sum reductions"
        return [x[0].sum(dim=op.array("dims"), keepdim=op.flag("keep_dims"))]
    if n in ("rp.attention", "rp.attention_grad"):
        assert "mask" not in a and "softcap" not in a
        q, k, v = x[0], x[1], x[2]
        scale = op.float("scale") or q.shape[-1] ** -0.5
        f = lambda q, k, v: attention(q, k, v, op.flag("causal"),
                                      op.int("window"), scale)
        if n == "rp.attention":
            return [f(q, k, v)]
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        return list(torch.autograd.grad(f(q, k, v), (q, k, v), x[3]))
    if n == "rp.cross_entropy":
        return list(cross_entropy(x[0], x[1], op.int("ignore_index")))
    if n == "rp.cross_entropy_grad":
        logits = x[0].detach().requires_grad_()
        loss, _ = cross_entropy(logits, x[1], op.int("ignore_index"))
        return [torch.autograd.grad(loss, logits)[0] * x[2]]
    raise SystemExit(f"slice_grads.py: no evaluator for {n}")


def run(ops, env, weights):
    for op in ops:
        if op.name == "rp.param":
            vals = [weights[re.search(r'name = "([^"]+)"', op.attrs).group(1)]]
        elif op.name == "rp.constant":
            dt = torch.float64 if "f" in op.attrs.split(": tensor<")[-1] \
                else torch.int64
            vals = [dense(op.attrs, op.types[0], dt)]
        elif op.name in ("rp.yield", "func.return"):
            return [env[v] for v in op.operands]
        elif op.name == "rp.layer":
            args, body = op.body
            inner = dict(env)
            inner.update(zip(args, (env[v] for v in op.operands)))
            vals = run(body, inner, weights)
        else:
            vals = run_op(op, [env[v] for v in op.operands])
        if op.results:
            if op.n == 1:
                env[op.results] = vals[0]
            for j, v in enumerate(vals):
                env[f"{op.results}#{j}"] = v
    raise SystemExit("slice_grads.py: a block without a terminator")


def call(func, inputs, weights):
    env = {a: inputs[n] for a, n in zip(func["args"], func["arg_names"])}
    return dict(zip(func["res_names"], run(func["ops"], env, weights)))


def is_kept_grad(name):
    return name.startswith(("grad:keys:", "grad:values:"))


class Model:
    """What both scripts evaluate: the IR `rp-opt MODEL PASSES` prints (in
    its generic form), its functions (@main and the slices), random float64
    weights and tokens, @main's loss and gradients, the slices' sizes and
    offsets."""

    def __init__(self, rp_opt, model, passes, ignored_label=False):
        self.text = subprocess.run(
            [rp_opt, model] + passes + ["-mlir-print-op-generic"],
            check=True, capture_output=True, text=True).stdout
        funcs = functions(self.text)
        self.whole = funcs["main"]
        self.sliced = [funcs[f"main.slice{k}"] for k in range(len(funcs) - 1)]
        torch.manual_seed(0)
        self.weights = {}
        for m in re.finditer(r'"rp.param"\(\) <\{name = "([^"]+)".*?-> '
                             r"tensor<([^>]*)>", self.text):
            if m.group(1) not in self.weights:
                self.weights[m.group(1)] = torch.randn(
                    shape_of(m.group(2)), dtype=torch.float64) * 0.5
        whole = self.whole
        rows, self.seq = whole["shapes"][whole["arg_names"].index("tokens")]
        self.tokens = torch.randint(0, 16, (rows, self.seq))
        self.labels = torch.randint(0, 16, (rows, self.seq))
        if ignored_label:
            self.labels[0, 1] = -100
        self.one = torch.tensor(1.0, dtype=torch.float64)
        self.ref = call(whole, {"tokens": self.tokens, "labels": self.labels,
                                "loss_scale": self.one}, self.weights)
        self.sizes = [f["shapes"][f["arg_names"].index("tokens")][1]
                      for f in self.sliced]
        self.offsets = [sum(self.sizes[:k]) for k in range(len(self.sizes))]


def main():
    rp_opt, model, slices = sys.argv[1:4]
    m = Model(rp_opt, model, ["--rp-attach-loss"] + sys.argv[4:] + [
        f"--rp-slice-tokens=slices={slices}", "--rp-autodiff"],
        ignored_label=True)
    sliced, weights, tokens, labels = m.sliced, m.weights, m.tokens, m.labels
    one, ref, sizes, offsets, seq = m.one, m.ref, m.sizes, m.offsets, m.seq

    def inputs(k, kept, seeds):
        """Slice k's arguments: its tokens and labels, the kept keys and
        values of the slices before it, the gradients of its own."""
        o, s = offsets[k], sizes[k]
        d = {"tokens": tokens[:, o:o + s], "labels": labels[:, o:o + s],
             "loss_scale": one}
        for name, parts in kept.items():
            if k:
                d[name] = torch.cat(parts[:k], dim=2)
        d.update(seeds)
        return d

    def sweep(with_later):
        kept = {}
        for k, f in enumerate(sliced):  # forward, in slice order
            zeros = {n: torch.zeros(sh, dtype=torch.float64)
                     for n, sh in zip(f["arg_names"], f["shapes"])
                     if is_kept_grad(n)}
            for n, v in call(f, inputs(k, kept, zeros), weights).items():
                if n.startswith(("keys:", "values:")):
                    kept.setdefault(n, []).append(v)
        acc = {n: torch.zeros(p[0].shape[:2] + (seq,) + p[0].shape[3:],
                              dtype=torch.float64) for n, p in kept.items()}
        grads, loss = {}, 0.0
        for k in reversed(range(len(sliced))):  # backward, last slice first
            o, s = offsets[k], sizes[k]
            seeds = {"grad:" + n: a[:, :, o:o + s].clone() * with_later
                     for n, a in acc.items()}
            out = call(sliced[k], inputs(k, kept, seeds), weights)
            loss += float(out["loss_sum"])
            for n, v in out.items():
                if is_kept_grad(n):
                    acc[n[len("grad:"):]][:, :, :o] += v
                elif n.startswith("grad:"):
                    grads[n] = grads.get(n, 0) + v
        return loss, grads

    loss, grads = sweep(True)
    print(f"slices {','.join(map(str, sizes))}: loss {loss:.12g}, unsliced "
          f"{float(ref['loss_sum']):.12g}")
    worst = 0.0
    for n, g in sorted(ref.items()):
        if not n.startswith("grad:"):
            continue
        err = float((grads[n] - g).norm() / g.norm())
        worst = max(worst, err)
        print(f"{n} {'ok' if err <= TOL else 'MISMATCH'} {err:.3g}")
    print(f"worst {'within' if worst <= TOL else 'ABOVE'} {TOL:g}")
    _, dropped = sweep(False)
    err = max(float((dropped[n] - g).norm() / g.norm())
              for n, g in ref.items() if n.startswith("grad:"))
    print("control, the later slices' key and value gradients dropped: "
          f"{'differs' if err > 1e-3 else 'SAME'} ({err:.3g})")


if __name__ == "__main__":
    main()
