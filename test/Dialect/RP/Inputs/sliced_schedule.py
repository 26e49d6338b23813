"""A token-sliced schedule run command by command against the unsliced model.

Usage: sliced_schedule.py RP_OPT MODEL.mlir SLICES PARTITION [--transfers]

Runs `rp-opt MODEL --rp-attach-loss --rp-partition="PARTITION hw=host
microbatches=1" --rp-slice-tokens=slices=SLICES
--rp-lower-schedule [--rp-insert-transfers] --rp-autodiff` (slice_grads.py's
Model) and executes the rp.schedule it prints,
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
fail). With --transfers the kept prefix comes only through the copies
rp-insert-transfers adds (execute with `layer_at`), whose bytes are checked
against the slice functions'; the control is then the key uploads without
their waits on the key downloads.
"""

import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slice_grads as sg  # noqa: E402

FORWARD, BACKWARD, TAIL = 0, 1, 2


class Missing(Exception):
    pass


RETURN = sg.Op(None, 1, "func.return", "", "")


def schedule(text):
    """The rp.schedule's commands in order: computes (kind, job, layers
    begin to end, mb) and copies (direction, job, mb, bytes, `keys`: a kept
    keys and values copy), each with its token and the tokens it waits
    for."""
    out = []
    for line in text.splitlines():
        if '"rp.compute"' not in line and '"rp.copy"' not in line:
            continue
        op = sg.OP.match(line)
        tok, _, name, operands, attrs = op.groups()[:5]
        get = lambda k: int(re.search(k + r" = (-?\d+) :", attrs).group(1))
        c = {"tok": tok, "waits": [o.strip() for o in operands.split(",")
                                   if o.strip()],
             "compute": name == "rp.compute", "job": get("job"),
             "device": get("device"), "keys": "rp.kept_keys" in line}
        if c["compute"]:
            c.update({k: get(k) for k in ("kind", "begin", "end", "mb")})
            c["queue"] = "compute"
        else:
            c["up"] = get("direction") == 0
            c["mb"] = get("mb") if " mb = " in attrs else -1
            c["bytes"] = get("bytes")
            # A part of a prefix: the sequence's slices [first, end).
            part = re.search(r"rp.kept_slices = array<i64: (\d+), (\d+)>",
                             line)
            c["part"] = (int(part.group(1)), int(part.group(2))) if part \
                else None
            c["queue"] = ("weights" if get("kind") == 0 else "h2d") \
                if c["up"] else "d2h"
        out.append(c)
    return out


def happens_before(cmds):
    """Per command, the tokens of the commands that finish before it
    starts: those it waits for, and those ahead of it in its queue (a
    device's queue runs in order), transitively."""
    before, last = {}, {}
    for c in cmds:
        seen = set()
        for w in c["waits"] + ([last[c["device"], c["queue"]]]
                               if (c["device"], c["queue"]) in last else []):
            # (A command the control left out never finishes.)
            if w in before:
                seen |= {w} | before[w]
        before[c["tok"]] = seen
        last[c["device"], c["queue"]] = c["tok"]
    return before


def check_bytes(cmds, sliced, sizes, layer_at):
    """The kept-key copies' bytes against the slice functions' prefix
    arguments (f32): an upload of slice k carries its job's layers' of
    slice k, a download of slice k its job's layers' per token times k's
    size."""
    K = len(sizes)
    per_token = {}
    for f in sliced[1:2]:
        for n, sh in zip(f["arg_names"], f["shapes"]):
            if n.startswith(("keys:", "values:")):
                layer = n.split(":", 1)[1]
                per_token[layer] = per_token.get(layer, 0) + \
                    4 * int(torch.tensor(sh).prod()) // sizes[0]
    jobs = {c["job"]: (c["begin"], c["end"]) for c in cmds if c["compute"]}
    ups = downs = 0
    for c in cmds:
        if not c["keys"]:
            continue
        k = c["mb"] % K
        begin, end = jobs[c["job"]]
        rate = sum(b for n, b in per_token.items()
                   if begin <= layer_at[n] < end)
        first, end = c.get("part") or (0, k)
        want = rate * (sum(sizes[first:end]) if c["up"] else sizes[k])
        if c["bytes"] != want:
            return f"{'up' if c['up'] else 'down'} job {c['job']} mb " \
                   f"{c['mb']}: {c['bytes']} bytes, not {want}"
        ups, downs = ups + c["up"], downs + (not c["up"])
    return f"{ups} up, {downs} down, bytes as the slice functions'"


def execute(cmds, sliced, weights, tokens, labels, offsets, sizes,
            layer_at=None):
    """Runs the compute commands in order. With `layer_at` (each layer's
    index by name: the copies are checked), a command
    reads a kept prefix only through copies: its job's key upload for the
    microbatch finishes before it, and the download of every row it reads,
    made by the forward command of that slice that holds the layer,
    finishes before the upload."""
    K = len(sliced)
    before = happens_before(cmds)
    current = [None]

    def carried(k, j, name):
        c = current[0]
        mb = c["mb"] - k + j
        layer = layer_at[name.split(":", 1)[1]]
        make = [p for p in cmds if p["compute"] and p["kind"] == FORWARD and
                p["mb"] == mb and p["begin"] <= layer < p["end"]]
        down = [d for d in cmds if d["keys"] and not d["up"] and make and
                d["job"] == make[0]["job"] and d["mb"] == mb]
        # The upload that carries slice j: the whole prefix's, or the part
        # of it that holds j.
        up = [u for u in cmds if u["keys"] and u["up"] and
              u["job"] == c["job"] and u["mb"] == c["mb"] and
              (u.get("part") or (0, k))[0] <= j < (u.get("part") or (0, k))[1]]
        if not (make and down and up and up[0]["tok"] in before[c["tok"]] and
                down[0]["tok"] in before[up[0]["tok"]] and
                make[0]["tok"] in before[down[0]["tok"]]):
            raise Missing(f"job {c['job']} mb {c['mb']} reads {name} of "
                          f"slice {j}, which no download and upload bring")

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
                if layer_at:
                    carried(k, j, name)
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
        if not c["compute"]:
            continue
        current[0] = c
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
    transfers = sys.argv[5:] == ["--transfers"]
    m = sg.Model(rp_opt, model, [
        "--rp-attach-loss",
        f"--rp-partition={partition} hw=host microbatches=1",
        f"--rp-slice-tokens=slices={slices}", "--rp-lower-schedule"] +
        (["--rp-insert-transfers"] if transfers else []) + ["--rp-autodiff"])
    sliced, ref = m.sliced, m.ref
    cmds = schedule(m.text)
    # The layers' indices (a fused tail's layers are one layer after
    # rp-autodiff): their order in the model.
    layer_at = {n: i for i, n in enumerate(
        re.findall(r'rp.layer "([^"]+)"', open(model).read()))}
    names = {FORWARD: "F", BACKWARD: "B", TAIL: "T"}
    print("schedule: " + " ".join(
        f"{names[c['kind']]}{c['begin']}-{c['end']}/{c['mb']}" for c in cmds
        if c["compute"]))
    run = lambda cs: execute(cs, sliced, m.weights, m.tokens, m.labels,
                             m.offsets, m.sizes,
                             layer_at if transfers else None)
    if transfers:
        checked = check_bytes(cmds, sliced, m.sizes, layer_at)
        print(f"kept-key copies: {checked}")
    loss, grads = run(cmds)
    print(f"loss {loss:.12g}, unsliced {float(ref['loss_sum']):.12g}")
    worst = max(float((grads[n] - g).norm() / g.norm())
                for n, g in ref.items() if n.startswith("grad:"))
    print(f"{len(grads)} gradients, worst {worst:.3g}: "
          f"{'within' if worst <= sg.TOL else 'ABOVE'} {sg.TOL:g}")
    if transfers:
        # The control: key uploads that do not wait for the downloads of
        # the rows they bring up.
        down = {c["tok"] for c in cmds if c["keys"] and not c["up"]}
        cut = [dict(c, waits=[w for w in c["waits"] if w not in down])
               if c["keys"] and c["up"] else c for c in cmds]
        try:
            run(cut)
            print("control, key uploads without their downloads: RAN")
        except Missing as e:
            print(f"control, key uploads without their downloads: {e}")
        return
    tail = {c["job"] for c in cmds if c.get("kind") == TAIL}
    unswept = [c for c in cmds if not (c.get("kind") == FORWARD and
                                       c["job"] in tail)]
    try:
        run(unswept)
        print("control, without the tail's forward sweep: RAN")
    except Missing as e:
        print(f"control, without the tail's forward sweep: {e}")


if __name__ == "__main__":
    main()
