"""A token-sliced schedule run command by command against the unsliced model.

Usage: sliced_schedule.py RP_OPT MODEL.mlir SLICES PARTITION

Runs `rp-opt MODEL --rp-attach-loss --rp-partition="PARTITION hw=host
microbatches=1" --rp-slice-tokens=slices=SLICES
--rp-lower-schedule --rp-autodiff` and executes the rp.schedule it prints,
in its order, in float64 (slice_grads.py's evaluator): each compute command
of microbatch k runs slice k's layers of its job (forward: the forward
layers of its span; the tail's forward sweep: the fused tail for its kept
keys and values only; tail and backward: the differentiated layers). A
layer reads the kept prefix (the own keys and values of the earlier
slices) and its own keys' and values' gradients (rows [o, o + s) of the
later slices' prefix gradients, summed last slice first) only once every
command that makes them has run; a command that runs earlier is the
schedule's error, named. Prints the gradients against @main's, then runs
the schedule again without the tail's forward sweep (a control that must
fail).
"""

import os
import re
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slice_grads as sg  # noqa: E402

FORWARD, BACKWARD, TAIL = 0, 1, 2


class Missing(Exception):
    pass


RETURN = sg.Op(None, 1, "func.return", "", "")



def commands(text):
    out = []
    for line in text.splitlines():
        if '"rp.compute"' not in line:
            continue
        get = lambda k: int(re.search(k + r" = (-?\d+) :", line).group(1))
        out.append({k: get(k) for k in ("kind", "job", "begin", "end", "mb")})
    return out


def execute(cmds, sliced, weights, tokens, labels, offsets, sizes):
    K = len(sliced)
    one = torch.tensor(1.0, dtype=torch.float64)
    envs = []
    for k, f in enumerate(sliced):
        o, s = offsets[k], sizes[k]
        named = dict(zip(f["arg_names"], f["args"]))
        env = {named["tokens"]: tokens[:, o:o + s],
               named["labels"]: labels[:, o:o + s],
               named["loss_scale"]: one}
        envs.append(env)
    rets = [dict(zip(f["res_names"], f["ops"][-1].operands)) for f in sliced]

    def value(k, v):
        """Slice k's value `v`, or the reason it is not there yet."""
        env, f = envs[k], sliced[k]
        if v in env:
            return env[v]
        name = dict(zip(f["args"], f["arg_names"])).get(v)
        if name and name.startswith(("keys:", "values:")):
            parts = []
            for j in range(k):
                got = envs[j].get(rets[j][name])
                if got is None:
                    raise Missing(f"slice {k} reads {name} of slice {j}, "
                                  "which no command has computed")
                parts.append(got)
            return torch.cat(parts, dim=2)
        if name and sg.is_kept_grad(name):
            o, s = offsets[k], sizes[k]
            total = 0
            for j in reversed(range(k + 1, K)):
                got = envs[j].get(rets[j][name])
                if got is None:
                    raise Missing(f"slice {k} reads the gradient of its "
                                  f"{name[5:]} before slice {j} made it")
                total = total + got[:, :, o:o + s]
            return total
        raise Missing(f"slice {k} reads {v} before a command made it")

    def arg_name(k, v):
        f = sliced[k]
        return f["arg_names"][f["args"].index(v)] if v in f["args"] else None

    def keep(k, op, env, only=None):
        for r in op.results_named():
            if r in env and (only is None or r in only):
                envs[k][r] = env[r]

    def settle(k):
        # The function's own ops outside layers (weights, constants, the
        # position tables' rows, sums of weight gradients) once they can.
        for op in sliced[k]["ops"]:
            if op.name in ("rp.layer", "func.return") or \
                    op.results_named()[0] in envs[k]:
                continue
            try:
                env = {v: value(k, v) for v in op.operands}
            except Missing:
                continue
            sg.run([op, RETURN], env, weights)
            keep(k, op, env)

    def run_layer(k, op, sweep=False):
        """Runs layer `op` of slice k; in the tail's forward sweep, with
        zeros for the key gradients (not there yet; the kept keys and
        values do not read them), keeping only the kept results."""
        settle(k)
        env = {}
        for v in op.operands:
            name = arg_name(k, v)
            if sweep and name and sg.is_kept_grad(name):
                shape = sliced[k]["shapes"][sliced[k]["args"].index(v)]
                env[v] = torch.zeros(shape, dtype=torch.float64)
            else:
                env[v] = value(k, v)
        sg.run([op, RETURN], env, weights)
        kept = {v for n, v in rets[k].items()
                if n.startswith(("keys:", "values:"))}
        keep(k, op, env, only=kept if sweep else None)

    for c in cmds:
        k = c["mb"] % K
        inside = [op for op in sliced[k]["ops"] if op.name == "rp.layer" and
                  c["begin"] <= op.array("span")[0] and
                  op.array("span")[1] <= c["end"]]
        mine = [op for op in inside if op.int("role", 0) == c["kind"]]
        if c["kind"] == FORWARD and not mine:
            # The tail's forward sweep.
            for op in inside:
                if op.int("role", 0) == TAIL:
                    run_layer(k, op, sweep=True)
            continue
        for op in mine:
            run_layer(k, op)
    grads, loss = {}, 0.0
    for k in range(K):
        settle(k)
        for n, v in rets[k].items():
            if n.startswith("grad:") and not sg.is_kept_grad(n):
                if v not in envs[k]:
                    raise Missing(f"slice {k}'s {n} was never computed")
                grads[n] = grads.get(n, 0) + envs[k][v]
        loss += float(envs[k][rets[k]["loss_sum"]])
    return loss, grads


def main():
    rp_opt, model, slices, partition = sys.argv[1:5]
    text = subprocess.run(
        [rp_opt, model, "--rp-attach-loss",
         f"--rp-partition={partition} hw=host microbatches=1",
         f"--rp-slice-tokens=slices={slices}", "--rp-lower-schedule",
         "--rp-autodiff", "-mlir-print-op-generic"],
        check=True, capture_output=True, text=True).stdout
    funcs = sg.functions(text)
    whole = funcs["main"]
    sliced = [funcs[f"main.slice{k}"] for k in range(len(funcs) - 1)]
    torch.manual_seed(0)
    weights = {}
    for m in re.finditer(r'"rp.param"\(\) <\{name = "([^"]+)".*?-> '
                         r"tensor<([^>]*)>", text):
        if m.group(1) not in weights:
            weights[m.group(1)] = torch.randn(
                sg.shape_of(m.group(2)), dtype=torch.float64) * 0.5
    rows, seq = whole["shapes"][whole["arg_names"].index("tokens")]
    tokens = torch.randint(0, 16, (rows, seq))
    labels = torch.randint(0, 16, (rows, seq))
    one = torch.tensor(1.0, dtype=torch.float64)
    ref = sg.call(whole, {"tokens": tokens, "labels": labels,
                          "loss_scale": one}, weights)
    sizes = [f["shapes"][f["arg_names"].index("tokens")][1] for f in sliced]
    offsets = [sum(sizes[:k]) for k in range(len(sizes))]
    cmds = commands(text)
    names = {FORWARD: "F", BACKWARD: "B", TAIL: "T"}
    print("schedule: " + " ".join(
        f"{names[c['kind']]}{c['begin']}-{c['end']}/{c['mb']}" for c in cmds))
    loss, grads = execute(cmds, sliced, weights, tokens, labels, offsets,
                          sizes)
    print(f"loss {loss:.12g}, unsliced {float(ref['loss_sum']):.12g}")
    worst = max(float((grads[n] - g).norm() / g.norm())
                for n, g in ref.items() if n.startswith("grad:"))
    print(f"{len(grads)} gradients, worst {worst:.3g}: "
          f"{'within' if worst <= sg.TOL else 'ABOVE'} {sg.TOL:g}")
    tail = {c["job"] for c in cmds if c["kind"] == TAIL}
    unswept = [c for c in cmds if not (c["kind"] == FORWARD and
                                       c["job"] in tail)]
    try:
        execute(unswept, sliced, weights, tokens, labels, offsets, sizes)
        print("control, without the tail's forward sweep: RAN")
    except Missing as e:
        print(f"control, without the tail's forward sweep: {e}")


if __name__ == "__main__":
    main()
