"""Every family of transformers' MODEL_FOR_CAUSAL_LM_MAPPING through rp's
three front ends: rp.trace, the TorchScript ONNX exporter (opset 17,
do_constant_folding=False) and torch 2's dynamo exporter (opset 18,
optimize=False, which keeps the parameters' names).

Each family's model is built offline (HF_HUB_OFFLINE=1) from its config
class's defaults shrunk by one rule (bench/families_shrink.py's
``shrink``): every size attribute the config has is lowered to the value in
SIZES when its default is larger, token ids past the shrunk vocabulary move
inside it, and the config class builds the config again from those values,
so the fields it derives from them follow and its validators run (a few
families' defaults leave a field their model reads unset or inconsistent:
FAMILY_FIELDS sets it from the config's own values). Per family and path:
the step-0 loss within 1e-4 of PyTorch's, every gradient by its
named_parameters() name within 1e-4 (relative norm), and 2 devices bitwise
equal to 1 (loss and gradients). A cell that fails says why.

    HF_HUB_OFFLINE=1 .venv-torch2/bin/python bench/families.py \\
        --json build/families.json --markdown docs/models.md
    .venv-torch2/bin/python bench/families.py --families llama,gemma2
    # rerun a few families (and paths) into the checked-in tables:
    .venv-torch2/bin/python bench/families.py --families roberta,bert \\
        --paths torchscript,dynamo --update --markdown docs/models.md \\
        --write-expected test/python/families-expected.json

(bench/families_table.py writes the tables.)
test/python/torch2-families.py runs a fixed sample against the checked-in
table test/python/families-expected.json (--write-expected rewrites it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "test" / "python" / "Inputs"))

from families_shrink import (  # noqa: E402
    TRAIN_MODE, VOCAB, default_config, shrink)
from families_export import (  # noqa: E402
    cause, dynamo_export, export_why)

PATHS = ("trace", "torchscript", "dynamo")
M = 2  # microbatches of one 16-token sequence
TOL = 1e-4
PATH_SECONDS = 60
PADDING_FLAGS = True  # --no-padding-flags: as rp-import before it had them


def build(family, edit=None):
    """The family's shrunk model wrapped to return the logits only;
    edit(config), when given, changes the shrunk config before the model
    is built (a test's smaller part the shrink rule cannot reach)."""
    import torch
    import transformers as T
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    import hf_models
    import tiny_gpt
    config = shrink(default_config(family), family)
    if edit is not None:
        edit(config)
    cls = getattr(T, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[family])
    # A multimodal family's causal LM takes its text (or decoder) config:
    # the sub-config of the class's config type.
    want = getattr(cls, "config_class", None)
    if isinstance(want, type) and not isinstance(config, want):
        config = next((getattr(config, k) for k in vars(config)
                       if isinstance(getattr(config, k), want)), config)
    config.use_cache = False
    torch.manual_seed(0)
    lm = cls(config)
    # Dropout off (rp trains without dropout; the shrink sets it to 0).
    lm.train() if family in TRAIN_MODE else lm.eval()
    return tiny_gpt.make_distinct(hf_models.LogitsOnly(lm))


def reference(model, tokens, labels):
    """PyTorch's step-0 loss and the gradient of every parameter that gets
    one, by name (a parameter the forward never reads has none)."""
    import torch
    model.zero_grad()
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
        ignore_index=-100)
    loss.backward()
    grads = {n: p.grad.detach().double().numpy()
             for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return loss.item(), grads


def no_grad_part(model, tokens):
    """The path of the first module the forward runs under
    torch.no_grad() (HRM's early recurrent cycles, a k-step gradient),
    or None: an ONNX export records those ops as any other, so rp-import
    trains the gradient PyTorch would take with gradients on throughout."""
    import torch
    found = []

    def pre(mod, _inp):
        if not found and not torch.is_grad_enabled():
            found.append(mod)

    handles = [m.register_forward_pre_hook(pre) for m in model.modules()]
    try:
        with torch.enable_grad():
            model(tokens[:1])
    finally:
        for h in handles:
            h.remove()
    if not found:
        return None
    return next(n for n, m in model.named_modules() if m is found[0])


def _reason(exc):
    """One line saying why: the tool's first error line or the exception's
    first line."""
    from rp.tools import ToolError
    inner = exc if isinstance(exc, ToolError) else cause(exc)
    text = exc.stderr if isinstance(exc, ToolError) else str(inner)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    pick = next((ln for ln in lines if "error" in ln.lower()),
                lines[0] if lines else "")
    if not isinstance(exc, ToolError):
        first = export_why(text) or (lines[0] if lines else "")
        pick = f"{type(exc).__name__}: {pick}" if inner is exc else \
            f"{type(exc).__name__} ({type(inner).__name__}): {first}"
    pick = pick.replace("|", "/")
    return pick if len(pick) <= 300 else pick[:297] + "..."


def _source(path, model, tokens, out):
    import rp
    import step0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path == "trace":
            return rp.trace(model, (tokens[:1],), out / "trace")
        onnx_path = out / f"{path}.onnx"
        # transformers 5's default grouped_mm experts call aten::histc,
        # which the TorchScript exporter cannot write, and a custom op
        # (transformers::grouped_mm_fallback) with no ONNX function, which
        # stops the dynamo exporter: TorchScript exports the eager loop and
        # dynamo the batched_mm form, as docs/moe.md says (torch.export
        # stops at a data-dependent guard in the eager loop).
        # JetMoE's mixtures split their tokens by a .tolist() of the
        # routing: exported in rp.trace's form (rp.onnx_forms), as a user
        # exports them; HRM's no-grad cycles are marked (StopGradient).
        import rp.onnx_forms
        with experts_implementation(
                model, "eager" if path == "torchscript" else "batched_mm"), \
                rp.onnx_forms.exportable(model):
            if path == "torchscript":
                # The symbolics the TorchScript exporter lacks (expm1,
                # rms_norm, linalg_solve_triangular) or gets wrong
                # (flatten), as a user registers them (docs/models.md).
                import rp.onnx_symbolics
                rp.onnx_symbolics.register()
                step0.export_onnx(model, {"input_ids": tokens[:1]},
                                  onnx_path)
            else:
                dynamo_export(model, tokens[:1], onnx_path)
        return onnx_path


@contextlib.contextmanager
def experts_implementation(model, name):
    """Every transformers config in `model` set to the experts
    implementation `name` meanwhile."""
    configs = {id(m.config): m.config for m in model.modules()
               if hasattr(type(getattr(m, "config", None)),
                          "_experts_implementation")}
    saved = {k: c._experts_implementation_internal
             for k, c in configs.items()}
    try:
        for c in configs.values():
            c._experts_implementation = name
        yield
    finally:
        for k, c in configs.items():
            c._experts_implementation_internal = saved[k]


def padding_flags(model, onnx_path):
    """--padding-idx NAME=ROW for each nn.Embedding with a padding_idx,
    under whichever of the weight's names (a tied weight has several) the
    ONNX file holds: ONNX has no padding_idx, so rp-import is told."""
    import onnx
    import torch
    held = {t.name for t in onnx.load(str(onnx_path),
                                      load_external_data=False)
            .graph.initializer}
    flags = []
    for path, m in model.named_modules(remove_duplicate=False):
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
            for name in aliases(model, m.weight):
                if name in held:
                    flags.append(f"{name}={m.padding_idx % m.num_embeddings}")
    return sorted(set(flags))


def aliases(model, param):
    """Every name of `param` in the model (a tied weight has several)."""
    return [n for n, p in model.named_parameters(remove_duplicate=False)
            if p is param]


def _train(src, out, tag, devices, tokens, labels, flags=()):
    import rp
    from rp import safetensors as rp_safetensors
    plan = rp.compile(src, out / f"{tag}-{devices}.rpplan", devices=devices,
                      microbatches=M, padding_idx=list(flags) or None)
    grads = out / f"{tag}-{devices}.safetensors"
    loss = list(rp.train(plan, {"input_ids": tokens}, labels, steps=1,
                         sync=True, dump_grads=grads))[0]
    return loss, rp_safetensors.read(grads)


def check_path(path, model, ref, tokens, labels, out, no_grad=None):
    """{"loss", "grads", "bitwise": bool or None, "reason": str or None,
    "detail": str}. ``no_grad``: no_grad_part's module, named in the
    reason of an ONNX path whose gradients differ."""
    import numpy as np
    cell = {"loss": None, "grads": None, "bitwise": None, "reason": None,
            "detail": ""}
    ref_loss, ref_grads = ref
    try:
        src = _source(path, model, tokens, out)
        flags = padding_flags(model, src) \
            if path != "trace" and PADDING_FLAGS else []
        loss, grads = _train(src, out, path, 1, tokens, labels, flags)
        # A tied weight may reach rp under another of its state_dict names.
        params = dict(model.named_parameters())
        for n in ref_grads:
            if n not in grads:
                alt = [a for a in aliases(model, params[n]) if a in grads]
                if alt:
                    grads[n] = grads[alt[0]]
    except Exception as exc:  # noqa: BLE001 - every failure is a table cell
        cell["reason"] = _reason(exc)
        return cell
    cell["loss"] = abs(loss - ref_loss) <= TOL * abs(ref_loss)
    missing = [n for n in ref_grads if n not in grads]
    # Relative to the larger of the tensor's own norm and 1% of the whole
    # gradient's: a gradient that is zero in exact arithmetic (an
    # attention key bias: softmax ignores a shift) is float noise in both.
    floor = 0.01 * np.sqrt(sum(np.linalg.norm(g) ** 2
                               for g in ref_grads.values()))
    errs = {}
    for n, g in ref_grads.items():
        if n in grads:
            diff = np.linalg.norm(grads[n].astype(np.float64) - g)
            errs[n] = diff / max(np.linalg.norm(g), floor, 1e-30)
    # (not e <= TOL: a NaN gradient is off, not within.)
    bad = sorted((n for n, e in errs.items() if not e <= TOL),
                 key=lambda n: -errs[n])
    cell["grads"] = not missing and not bad
    worst = max(errs.values()) if errs else float("nan")
    cell["detail"] = (f"{len(errs) - len(bad)} of {len(ref_grads)} "
                      f"gradients by name within {TOL:g} (worst {worst:.1e})")
    try:
        loss2, grads2 = _train(src, out, path, 2, tokens, labels, flags)
        for n in ref_grads:
            if n not in grads2 and n in grads:
                alt = [a for a in aliases(model, params[n]) if a in grads2]
                if alt:
                    grads2[n] = grads2[alt[0]]
        cell["bitwise"] = loss2 == loss and sorted(grads2) == sorted(grads) \
            and all(np.array_equal(grads2[n], grads[n]) for n in grads)
    except Exception as exc:  # noqa: BLE001
        cell["bitwise"] = False
        cell["reason"] = "2 devices: " + _reason(exc)
    if not cell["loss"] and cell["reason"] is None:
        cell["reason"] = f"loss rp {loss:.7g}, torch {ref_loss:.7g}"
    elif missing and cell["reason"] is None:
        cell["reason"] = (f"{len(missing)} of {len(ref_grads)} parameters "
                          f"lost their names (e.g. {missing[0]})")
    elif bad and cell["reason"] is None and no_grad and path != "trace":
        cell["reason"] = (f"the model runs '{no_grad}' under torch.no_grad()"
                          f" (a gradient through part of its recurrence "
                          f"only), which ONNX cannot record: rp trains the "
                          f"gradient with gradients on throughout ({len(bad)}"
                          f" of {len(ref_grads)} differ from PyTorch's)")
    elif bad and cell["reason"] is None:
        cell["reason"] = (f"gradient of {bad[0]} off by {errs[bad[0]]:.2g}"
                          f" ({len(bad)} of {len(ref_grads)} off)")
    elif not cell["bitwise"] and cell["reason"] is None:
        cell["reason"] = "2 devices differ from 1"
    return cell


def run_family(family, out, paths=PATHS):
    """{"build": reason or None, path: cell, ...} for one family."""
    import tiny_gpt
    out.mkdir(parents=True, exist_ok=True)
    result = {"family": family, "build": None}
    try:
        model = build(family)
    except Exception as exc:  # noqa: BLE001
        result["build"] = _reason(exc)
        return result
    try:
        tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
        ref = reference(model, tokens, labels)
        no_grad = no_grad_part(model, tokens)
    except Exception as exc:  # noqa: BLE001
        # It builds, and PyTorch's own forward (or backward) from the
        # tokens refuses: an assistant that drafts from its target model's
        # states, a model that trains only in train mode.
        result["build"] = "PyTorch's step from input_ids: " + _reason(exc)
        return result
    import signal
    expired = []

    def expire(*_):
        expired.append(True)
        raise TimeoutError(f"took more than {PATH_SECONDS} s")

    for path in paths:
        start = time.perf_counter()
        expired.clear()
        # torch.export can loop for minutes on a data-dependent model: the
        # cell times out, the other paths still run.
        old = signal.signal(signal.SIGALRM, expire)
        signal.alarm(PATH_SECONDS)
        try:
            result[path] = check_path(path, model, ref, tokens, labels, out,
                                      no_grad)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        # The exporters wrap the alarm's TimeoutError in their own errors
        # (ConversionError, PassError): the cell says it ran out of time.
        if expired:
            result[path]["reason"] = f"TimeoutError: took more than " \
                f"{PATH_SECONDS} s (--path-seconds)"
        result[path]["seconds"] = round(time.perf_counter() - start, 1)
    return result


def _clean(reason):
    """The reason without the run's own paths (tool messages start with
    the file they read)."""
    import re
    return re.sub(r"\S*/(\S+)\.onnx:\d+:\d+: error: ", "", reason)


def status(result, path):
    """"pass", or the reason the cell fails."""
    if result.get("build"):
        return "cannot build: " + _clean(result["build"])
    cell = result.get(path)
    if cell is None:
        return "not run"
    if cell["loss"] and cell["grads"] and cell["bitwise"]:
        return "pass"
    return _clean(cell["reason"] or "fails")


def families():
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def run_isolated(names, out, timeout, paths=PATHS, extra=()):
    """run_family over `names` in one child process (torch is imported
    once), yielding each result as it comes; a family that crashes or hangs
    the child is that family's cell, and the rest run in a new child."""
    names = list(names)
    while names:
        cmd = [sys.executable, __file__, "--one", ",".join(names), "--out",
               str(out), "--paths", ",".join(paths), *extra]
        # The child's stderr (an exporter's warnings: megabytes for some
        # families) goes to a file: a pipe nobody reads fills and blocks
        # the child until the family times out.
        import tempfile
        err = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                                text=True)
        got = 0
        start = time.perf_counter()
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = timeout - (time.perf_counter() - start)
            if left <= 0 or not sel.select(left):
                proc.kill()
                proc.wait()
                yield {"family": names[got], "build": None,
                       **{p: {"loss": None, "grads": None, "bitwise": None,
                              "reason": f"timed out after {timeout} s",
                              "detail": ""} for p in paths}}
                got += 1
                break
            line = proc.stdout.readline()
            if not line:
                rc = proc.wait()
                if got < len(names):
                    err.seek(0)
                    tail = (err.read().strip().splitlines()
                            or ["no output"])[-1]
                    yield {"family": names[got],
                           "build": f"the run crashed (exit {rc}): {tail}"}
                    got += 1
                break
            try:
                res = json.loads(line)
            except json.JSONDecodeError:
                continue
            yield res
            got += 1
            start = time.perf_counter()
        err.close()
        names = names[got:]


def main(argv=None):
    global PADDING_FLAGS, PATH_SECONDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", help="comma-separated (default: all)")
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--out", default="build/families")
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--write-expected",
                    help="write {family: {path: pass or why}} here (the "
                         "table test/python/torch2-families.py checks)")
    ap.add_argument("--timeout", type=int, default=420,
                    help="seconds per family, all paths")
    ap.add_argument("--path-seconds", type=int, default=PATH_SECONDS,
                    help="seconds per path before its cell times out "
                         "(more on a loaded machine)")
    ap.add_argument("--no-padding-flags", action="store_true",
                    help="do not pass --padding-idx (rp before it existed)")
    ap.add_argument("--from-json", help="write the tables of this --json "
                    "run instead of running")
    ap.add_argument("--update", action="store_true",
                    help="replace only the rows of --families (and --paths) "
                         "in the existing --markdown and --write-expected "
                         "files, recounting the passes, instead of "
                         "rewriting them")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    paths = tuple(args.paths.split(","))
    PADDING_FLAGS = not args.no_padding_flags
    PATH_SECONDS = args.path_seconds
    extra = ["--no-padding-flags"] if args.no_padding_flags else []
    extra += ["--path-seconds", str(PATH_SECONDS)]
    if args.one:
        for name in args.one.split(","):
            try:
                res = run_family(name, Path(args.out) / name, paths)
            except Exception:  # noqa: BLE001
                res = {"family": name,
                       "build": traceback.format_exc().splitlines()[-1]}
            print(json.dumps(res), flush=True)
        return 0
    names = args.families.split(",") if args.families else families()
    results = []
    if args.from_json:  # re-render a run's tables
        results = json.loads(Path(args.from_json).read_text())
        names = []
    start = time.perf_counter()
    for res in run_isolated(names, Path(args.out), args.timeout, paths,
                            extra):
        results.append(res)
        print(f"{res['family']}: " + ", ".join(
            f"{p} {status(res, p)[:100]}" for p in paths)
            + f" ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    from families_table import markdown, merge_markdown
    if args.markdown:
        md = Path(args.markdown)
        md.write_text(merge_markdown(md.read_text(), results, paths)
                      if args.update else markdown(results))
    if args.write_expected:
        # A family that does not build fails on every path.
        table = {r["family"]: {p: status(r, p) for p in
                               (PATHS if r.get("build") else paths)}
                 for r in results}
        if args.update:
            old = json.loads(Path(args.write_expected).read_text())
            for fam, cells in table.items():
                old.setdefault(fam, {}).update(cells)
            table = old
        Path(args.write_expected).write_text(
            json.dumps(table, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
