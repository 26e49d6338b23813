"""Every family of transformers' MODEL_FOR_CAUSAL_LM_MAPPING through rp's
three front ends: rp.trace, the TorchScript ONNX exporter (opset 17,
do_constant_folding=False) and torch 2's dynamo exporter (opset 18,
optimize=False, which keeps the parameters' names).

Each family's model is built offline (HF_HUB_OFFLINE=1) from its config
class's defaults shrunk by one rule (``shrink``): every size attribute the
config has is lowered to the value in SIZES when its default is larger, and
token ids past the shrunk vocabulary move inside it. Per family and path:
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
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "test" / "python" / "Inputs"))

PATHS = ("trace", "torchscript", "dynamo")
M = 2  # microbatches of one 16-token sequence
VOCAB = 64
TOL = 1e-4
PATH_SECONDS = 60
PADDING_FLAGS = True  # --no-padding-flags: as rp-import before it had them

from families_export import cause, dynamo_export  # noqa: E402

# The one shrink rule's targets: an attribute the default config has is set
# to this value when its default is larger (so a family whose default is
# already small, or lacks the feature, keeps its own).
SIZES = {
    "vocab_size": VOCAB, "hidden_size": 32, "n_embd": 32, "d_model": 32,
    "embed_dim": 32, "intermediate_size": 48, "ffn_hidden_size": 48,
    "n_inner": 48, "ffn_dim": 48, "num_hidden_layers": 2, "n_layer": 2,
    "num_layers": 2, "n_layers": 2, "num_attention_heads": 4, "n_head": 4,
    "n_heads": 4, "head_dim": 8, "max_position_embeddings": 64,
    "n_positions": 64, "n_ctx": 64, "max_window_layers": 2,
    "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
    "expert_intermediate_size": 16, "num_experts": 4, "num_local_experts": 4,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_topk": 2,
    "n_shared_experts": 1, "num_shared_experts": 1, "n_group": 2,
    "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8,
    "sliding_window": 8, "first_k_dense_replace": 1, "rotary_dim": 4,
    "rotary_emb_base": 10000,
    # Encoder-decoder configs (their CausalLM is the decoder) name their
    # sizes per stack.
    "encoder_layers": 2, "decoder_layers": 2, "num_encoder_layers": 2,
    "num_decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_encoder_attention_heads": 4,
    "num_decoder_attention_heads": 4, "encoder_ffn_dim": 48,
    "decoder_ffn_dim": 48,
}


# Sizes a default config may leave unset (None) that its model cannot be
# built without (the head width derived as hidden / heads in forward code
# that reads config.head_dim; the experts per token of an MoE): set to
# SIZES' value. Other unset sizes mean a feature is off (sliding_window,
# q_lora_rank, n_group) and stay unset.
UNSET_SIZES = ("head_dim", "num_experts_per_tok")


def _get(config, key):
    """config.key, None when it has none or it is per-layer (transformers
    refuses a global read of an attribute that may vary by layer)."""
    try:
        return getattr(config, key, None)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError
        return None


def shrink(config):
    """The rule, applied to the config and every sub-config it holds (a
    multimodal model's text_config): SIZES above, key/value heads 4 when the
    default has as many as query heads (multi-head) and 2 otherwise, list
    attributes with one entry per layer cut to the first layers, the
    UNSET_SIZES a default leaves None set as SIZES says, token ids
    past the vocabulary moved to its last ids, dropout off."""
    # A config may hold sub-configs, or a list of per-layer ones (each
    # shrunk alike, so the global values may be read and set meanwhile).
    per_layer = hasattr(type(config),
                        "allow_global_per_layer_attribute_access")
    if per_layer:
        config.allow_global_per_layer_attribute_access = True
    subs = [getattr(config, k) for k in vars(config)
            if hasattr(getattr(config, k), "to_dict")]
    subs += [c for k in vars(config) if isinstance(getattr(config, k), list)
             for c in getattr(config, k) if hasattr(c, "to_dict")]
    for sub in subs:
        shrink(sub)
    layers0 = next((_get(config, k) for k in
                    ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                    if isinstance(_get(config, k), int)), None)
    heads0 = _get(config, "num_attention_heads")
    for key, small in SIZES.items():
        v = _get(config, key)
        if v is None and key in UNSET_SIZES:
            try:
                setattr(config, key, small)
            except (NotImplementedError, AttributeError):
                pass
        elif isinstance(v, int) and not isinstance(v, bool) and v > small:
            try:
                setattr(config, key, small)
            except (NotImplementedError, AttributeError):
                pass  # a derived attribute: its parts are in SIZES
    kv = _get(config, "num_key_value_heads")
    if isinstance(kv, int) and heads0:
        config.num_key_value_heads = 4 if kv == heads0 else 2
    layers = next((_get(config, k) for k in
                   ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                   if isinstance(_get(config, k), int)), None)
    for key in list(vars(config)):
        v = getattr(config, key)
        if isinstance(v, list) and layers0 and len(v) == layers0 and \
                layers < layers0:
            setattr(config, key, v[:layers])
        elif key.endswith("token_id") and isinstance(v, int) and v >= VOCAB:
            setattr(config, key, VOCAB - 1)
        elif key.endswith("dropout") or key.endswith("pdrop") or \
                key.endswith("dropout_prob") or key.endswith("dropout_rate"):
            if isinstance(v, float):
                setattr(config, key, 0.0)
    if per_layer:
        config.allow_global_per_layer_attribute_access = False
    return config


def build(family):
    """The family's shrunk model wrapped to return the logits only."""
    import torch
    import transformers as T
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import \
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    import hf_models
    import tiny_gpt
    config = shrink(CONFIG_MAPPING[family]())
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
    lm.eval()  # dropout off; rp trains without dropout
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
        pick = f"{type(exc).__name__}: {pick}" if inner is exc else \
            f"{type(exc).__name__} ({type(inner).__name__}): {lines[0] if lines else ''}"
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
        with experts_implementation(
                model, "eager" if path == "torchscript" else "batched_mm"):
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
    bad = sorted((n for n, e in errs.items() if e > TOL),
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
        tokens, labels = tiny_gpt.batch(vocab=VOCAB, b=M, s=16)
        ref = reference(model, tokens, labels)
        no_grad = no_grad_part(model, tokens)
    except Exception as exc:  # noqa: BLE001
        result["build"] = _reason(exc)
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
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
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
                    tail = (proc.stderr.read().strip().splitlines()
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
