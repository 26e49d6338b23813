"""``rp.export``: a fine-tuning run's weights back into the libraries the
model came from (``python -m rp export RUN --hf|--peft|--merged DIR``).

RUN is a ``rp finetune`` output folder (its ``checkpoints/last``), or a
checkpoint folder inside one (``checkpoints/best``). The weights exported
are the checkpoint's master weights (``weights.safetensors``): W after the
last update, which is also what a resumed run continues from; in async
mode ``compute.safetensors`` is one update older.

* ``--hf DIR``: the base model from the run's model folder with the
  trained weights loaded by name, written with ``save_pretrained``
  (safetensors with ``{"format": "pt"}`` metadata, sharded with an index
  when large, config and generation config), and the tokenizer: a folder
  ``AutoModelForCausalLM.from_pretrained`` loads. A LoRA run's adapters are
  merged in (as ``--merged``).
* ``--peft DIR``: a LoRA run's adapters as PEFT writes them:
  ``adapter_config.json`` (rank, alpha, dropout, the adapted modules,
  read from the run's plan, which records them) and
  ``adapter_model.safetensors`` with PEFT's names
  (``base_model.model.<module>.lora_A.weight``): ``PeftModel.from_pretrained``
  loads it on the base model. Adapters of stacked expert weights export as
  PEFT's ``target_parameters`` (built and saved with PEFT itself). An
  adapter on a tied LM head (rp names the tied weight by the embedding) is
  the head module's: PEFT adapts an embedding as a lookup.
* ``--merged DIR``: W + (alpha / rank) B A for every adapted weight, then
  as ``--hf``.

A run with a quantized frozen base (``--quantize-base nf4|int8``) trained
its adapters against the dequantized base, so ``--hf`` and ``--merged``
dequantize each quantized weight (the plan's blobs, ``rp.quant``: the f32
values the devices computed from) and merge into that: the model exported
is the model the run trained (in the model folder's dtype, or ``dtype``),
not the original weights plus the adapters. ``--peft`` writes the adapters alone, to load on
the base model quantized as the run's was (bitsandbytes' NF4 has the same
codes and scales) or not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

from rp._hf_folder import load_model

PathLike = Union[str, os.PathLike]


def plan_lora(plan: PathLike) -> Optional[Dict[str, Any]]:
    """The LoRA settings a plan was compiled with (rank, alpha, targets,
    modules_to_save, dropout), read from the plan itself (``rp-run PLAN
    --describe=json``); None for a plan without adapters (or one older
    than the record)."""
    from rp.tools import run_tool
    described = json.loads(run_tool("rp-run", [str(plan), "--describe=json"])
                           .stdout)
    lora = described.get("lora")
    if not lora or not lora.get("rank"):
        return None
    return {"rank": int(lora["rank"]), "alpha": float(lora["alpha"]),
            "targets": lora.get("targets", ""),
            "modules_to_save": lora.get("modules_to_save", ""),
            "dropout": float(lora.get("dropout", 0.0))}


def _with_plan_lora(folder: Path, record: Dict[str, Any]) -> Dict[str, Any]:
    """`record` with its LoRA settings read from the run's plan, which
    holds what was compiled (no flag to repeat, no record to trust)."""
    plan = folder / record.get("plan", "model.rpplan")
    if plan.is_file():
        lora = plan_lora(plan)
        if lora is not None:
            # The plan holds the adapters' settings, not the base's storage
            # (quantize_base): dropping the record's would export a quantized
            # run's base undequantized.
            lora.update({k: v for k, v in (record.get("lora") or {}).items()
                         if k not in lora})
        record = dict(record, lora=lora)
    return record


def find_run(run: PathLike) -> Tuple[Path, Dict[str, Any], Path]:
    """(run folder, its finetune.json record with the plan's LoRA
    settings, the checkpoint folder)."""
    run = Path(run)
    if (run / "finetune.json").is_file():
        folder, checkpoint = run, run / "checkpoints" / "last"
    elif (run / "weights.safetensors").is_file():
        checkpoint = run
        folder = next((p for p in run.parents
                       if (p / "finetune.json").is_file()), None)
        if folder is None and (run / "run.json").is_file():
            # A checkpoint copied away from its run: its own record.
            return run, json.loads((run / "run.json").read_text()), run
        if folder is None:
            raise ValueError(f"{run} is a checkpoint outside any rp finetune "
                             "folder (no finetune.json above it, no run.json "
                             "in it)")
    else:
        raise ValueError(f"{run} is neither an rp finetune folder "
                         "(finetune.json) nor a checkpoint (weights.safetensors)")
    if not (checkpoint / "weights.safetensors").is_file():
        raise ValueError(f"{checkpoint} has no weights.safetensors; the run "
                         "has not saved a checkpoint yet")
    record = json.loads((folder / "finetune.json").read_text())
    return folder, _with_plan_lora(folder, record), checkpoint


def _split(weights: Dict[str, Any]):
    """(full weights, {module weight: (A, B)})."""
    full, lora = {}, {}
    for name, value in weights.items():
        for part in ("lora_A", "lora_B"):
            if name.endswith("." + part):
                base = name[:-len(part) - 1]
                lora.setdefault(base, {})[part] = value
                break
        else:
            full[name] = value
    return full, {k: (v["lora_A"], v["lora_B"]) for k, v in lora.items()}


def _trained(checkpoint: Path):
    from rp import safetensors as rp_safetensors
    return _split(rp_safetensors.read(checkpoint / "weights.safetensors"))


def _quantized_base(folder: Path, record: Dict[str, Any]) -> Dict[str, Any]:
    """{weight name: its dequantized f32 values (flat)} of a run whose base
    was stored quantized: the blobs the plan reads (its u8 weight buffers,
    located by ``rp-run --describe json``)."""
    kind = (record.get("lora") or {}).get("quantize_base")
    if kind in (None, "none"):
        return {}
    import numpy as np
    from rp.tools import run_tool
    plan = folder / record["plan"]
    if not plan.is_file():
        raise ValueError(f"the run's base was stored {kind}: its plan {plan} "
                         "(which holds the quantized weights) is needed to "
                         "export the model it trained")
    text = run_tool("rp-run", ["--describe", "json", str(plan)]).stdout
    described = json.loads(text)
    files = [plan.parent / f["path"] for f in described.get("weight_files", [])]
    out = {}
    for buf in described.get("buffers", []):
        weight = buf.get("weight")
        if buf.get("dtype") != "u8" or not weight or weight.get("trainable"):
            continue
        nbytes = int(np.prod(buf["shape"]))
        with open(files[weight["file"]], "rb") as f:
            f.seek(int(weight["offset"]))
            blob = f.read(nbytes)
        out[weight["param"]] = (kind, blob)
    if not out:
        raise ValueError(f"{plan} has no quantized weights, though the run "
                         f"was compiled with quantize_base={kind}")
    return out


def _model_with(record: Dict[str, Any], checkpoint: Path, dtype: Optional[str],
                folder: Optional[Path] = None):
    """The base model with the run's weights in (LoRA merged; a quantized
    base dequantized first, as the run computed with it)."""
    import torch
    from rp import quant
    model, tokenizer = load_model(record["model"])
    full, lora = _trained(checkpoint)
    state = model.state_dict()
    blobs = _quantized_base(folder, record) if folder is not None else {}
    unknown = [n for n in blobs if n not in state]
    if unknown:
        raise ValueError(f"the plan's quantized weights {unknown[:3]} are not "
                         f"the model's in {record['model']}")
    with torch.no_grad():
        for name, (kind, blob) in blobs.items():
            values = quant.dequantize(kind, blob, state[name].numel())
            state[name].copy_(torch.from_numpy(
                values.reshape(tuple(state[name].shape))))
    missing = [n for n in list(full) + list(lora) if n not in state]
    if missing:
        raise ValueError(f"the checkpoint's weights {missing[:3]} are not the "
                         f"model's in {record['model']}")
    scale = (record["lora"]["alpha"] / record["lora"]["rank"]
             if record.get("lora") else 1.0)
    heads = _tied_heads(model, lora)
    with torch.no_grad():
        for name, value in full.items():
            state[name].copy_(torch.from_numpy(value.copy()))
        if heads:
            # The run adapted the head alone: W + s B A in the one tied
            # weight would change the lookup too, so the head is untied.
            _untie(model)
            state = model.state_dict()
        for name, (a, b) in lora.items():
            a, b = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
            delta = b @ a  # [(E,) out, in]
            # Experts stored [E, in, out] (GPT-OSS's, transformers'
            # `is_transposed`): the delta in the stack's own layout.
            owner = model.get_submodule(name.rsplit(".", 1)[0])
            # GPT-2's Conv1D keeps its weight [in, out] (x @ W) too.
            if (a.dim() == 3 and getattr(owner, "is_transposed", False)) or \
                    type(owner).__name__ == "Conv1D":
                delta = delta.transpose(-1, -2)
            target = heads[name] + ".weight" if name in heads else name
            state[target].add_(scale * delta)
    if dtype:
        model = model.to(getattr(torch, {"f32": "float32", "bf16": "bfloat16",
                                          "f16": "float16"}.get(dtype, dtype)))
    model.config.use_cache = True
    return model, tokenizer


def _tied_heads(model, names) -> Dict[str, str]:
    """{adapted weight: the LM head's module} for the adapters on a weight
    the model ties between its embedding and its head. rp names a tied
    weight by its first module (``model.embed_tokens.weight``) and adapts
    only its matmul, the head; PEFT adapts an ``nn.Embedding`` as a lookup,
    so such an adapter is the head's (``lm_head``). An adapter on an
    embedding's weight that no head shares is refused: rp adapted a matmul
    that no module of the model is."""
    import torch
    embedding = model.get_input_embeddings()
    head = model.get_output_embeddings()
    modules = {id(m): n for n, m in model.named_modules()}
    heads = {}
    for name in names:
        owner = model.get_submodule(name.rsplit(".", 1)[0])
        if not isinstance(owner, torch.nn.Embedding):
            continue
        if head is None or owner is not embedding or \
                head.weight is not embedding.weight:
            raise ValueError(
                f"the run adapted {name}, an embedding's weight that the "
                "model's LM head does not share: rp adapted a matmul reading "
                "it, which PEFT cannot express (it adapts an embedding as a "
                "lookup); leave it out of --lora-targets")
        heads[name] = modules[id(head)]
    return heads


def _untie(model) -> None:
    """The LM head given its own copy of the tied weight, and the config
    saying so, so that ``from_pretrained`` keeps the two apart."""
    import torch
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone())
    for config in {id(c): c for c in (model.config,
                                      model.config.get_text_config())}.values():
        config.tie_word_embeddings = False
    if hasattr(model, "_tied_weights_keys"):
        model._tied_weights_keys = None


def _meta_model(model_dir: str):
    """The model built on the meta device (no weight read), or None where
    it cannot be built."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    try:
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(
                AutoConfig.from_pretrained(model_dir))
    except Exception:  # noqa: BLE001 - callers fall back
        return None


def _one_kind(out: Path, kind: str) -> None:
    """Refuses to write a model beside an adapter or the reverse:
    transformers' ``from_pretrained`` of a folder with adapter_config.json
    loads the adapter on its base and ignores a model written beside it, so
    the folder would load as the other export, silently."""
    other, what = (("adapter_config.json", "a PEFT adapter") if kind == "hf"
                   else ("config.json", "a transformers model"))
    if (out / other).is_file():
        raise ValueError(f"{out} already holds {what} ({other}); export "
                         f"--{kind} to another folder or empty it first")


def folder_dtype(model_dir: PathLike) -> Optional[str]:
    """The dtype a model folder's config names (``dtype``, ``torch_dtype``
    before transformers 4.56) as rp spells it, bf16 or f16; None for f32
    or none named. An export defaults to it: a bf16 model comes back bf16,
    not twice its size in f32."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    name = config.get("dtype") or config.get("torch_dtype")
    return {"bfloat16": "bf16", "float16": "f16"}.get(name)


def export_hf(run: PathLike, out: PathLike, dtype: Optional[str] = None) -> Path:
    """RUN's weights (LoRA merged) as a transformers model folder, in
    ``dtype`` (default: the model folder's own)."""
    _one_kind(Path(out), "hf")
    folder, record, checkpoint = find_run(run)
    if dtype is None:
        dtype = folder_dtype(record["model"])
    model, tokenizer = _model_with(record, checkpoint, dtype, folder)
    out = Path(out)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


export_merged = export_hf


def export_peft(run: PathLike, out: PathLike) -> Path:
    """A LoRA run's adapters as a PEFT adapter folder."""
    _one_kind(Path(out), "peft")
    _, record, checkpoint = find_run(run)
    if not record.get("lora"):
        raise ValueError("the run trained every weight (no --lora-rank); "
                         "export it with --hf")
    from rp import safetensors as rp_safetensors
    full, lora = _trained(checkpoint)
    tensors, modules = {}, []
    # Parameters trained whole (modules_to_save): PEFT's names are the
    # model's under base_model.model, its config lists their modules.
    saved = sorted({name.rsplit(".", 1)[0] for name in full})
    for name, value in full.items():
        tensors[f"base_model.model.{name}"] = value
    if any(a.ndim != 2 for a, _ in lora.values()):
        return _export_peft_experts(record, full, lora, Path(out))
    meta = _meta_model(record["model"])
    heads = _tied_heads(meta, lora) if meta is not None else {}
    for name, (a, b) in sorted(lora.items()):
        module = name[:-len(".weight")] if name.endswith(".weight") else name
        module = heads.get(name, module)
        modules.append(module)
        tensors[f"base_model.model.{module}.lora_A.weight"] = a
        tensors[f"base_model.model.{module}.lora_B.weight"] = b
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    import numpy as np
    rp_safetensors.write_raw(
        out / "adapter_model.safetensors",
        [(name, "F32", array.shape,
          np.ascontiguousarray(array, np.float32).tobytes())
         for name, array in tensors.items()], {"format": "pt"})
    config = {
        "peft_type": "LORA", "task_type": "CAUSAL_LM",
        "base_model_name_or_path": record["model"],
        "r": int(record["lora"]["rank"]),
        "lora_alpha": float(record["lora"]["alpha"]),
        "lora_dropout": float(record["lora"].get("dropout", 0.0)),
        "bias": "none", "fan_in_fan_out": _conv1d(meta, modules),
        "target_modules": modules, "modules_to_save": saved or None,
        "inference_mode": True, "use_rslora": False, "use_dora": False,
        "init_lora_weights": True,
    }
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def _conv1d(model, modules) -> bool:
    """Whether the adapted modules are GPT-2's Conv1D (W [in, out]): PEFT's
    ``fan_in_fan_out`` (False where the model could not be built: PEFT
    corrects the flag on loading)."""
    return model is not None and any(
        type(model.get_submodule(m)).__name__ == "Conv1D" for m in modules)


def _export_peft_experts(record: Dict[str, Any], full, lora, out: Path) -> Path:
    """``--peft`` of a run whose adapters include stacked expert weights
    ([E, out, in], as transformers' Qwen3-MoE keeps its experts): PEFT
    adapts those with ``target_parameters`` (its ParamWrapper, several on
    one module nested in the module's parameter order), so the adapter is
    built with PEFT on the base model and saved by it, which names it as
    PEFT loads it. rp's A [E, r, in] is PEFT's lora_A [E r, in] (expert
    major); rp's B [E, out, r] is PEFT's lora_B [out, r E] (expert minor):
    PEFT's delta is einsum("o r e, e r i -> e o i") of the two, rp's B_e A_e."""
    import numpy as np
    import torch
    from peft import LoraConfig, get_peft_model

    base, _ = load_model(record["model"])
    state = base.state_dict()
    with torch.no_grad():
        # modules_to_save copies the module as it is when wrapped.
        for name, value in full.items():
            state[name].copy_(torch.from_numpy(value.copy()))
    # PEFT wraps nn.Linear modules; another module's weight (GPT-OSS's
    # router, a bare parameter read by F.linear) is a target parameter.
    heads = _tied_heads(base, lora)
    linear = {n for n, (a, _) in lora.items() if a.ndim == 2 and isinstance(
        base.get_submodule(n.rsplit(".", 1)[0]), torch.nn.Linear)}
    modules = sorted({n[:-len(".weight")] for n in linear} |
                     set(heads.values()))
    # The head's module owns the tied weight's adapter (PEFT names it so).
    by_module = {f"{m}.weight": n for n, m in heads.items()}
    params = sorted(n for n in lora if n not in linear and n not in heads)
    saved = sorted({name.rsplit(".", 1)[0] for name in full})
    lora_cfg = record["lora"]
    model = get_peft_model(base, LoraConfig(
        r=int(lora_cfg["rank"]), lora_alpha=float(lora_cfg["alpha"]),
        lora_dropout=0.0, target_modules=modules, target_parameters=params,
        modules_to_save=saved or None))
    done = set()
    with torch.no_grad():
        for name, module in model.named_modules():
            if not hasattr(module, "lora_A") or "default" not in module.lora_A:
                continue
            owner = name.removeprefix("base_model.model.").replace(
                ".base_layer", "")
            if hasattr(module, "parameter_name"):
                ours = f"{owner}.{module.parameter_name}"
                a, b = lora[ours]
                if a.ndim == 3:
                    experts, rank = a.shape[0], a.shape[1]
                    a = a.reshape(experts * rank, a.shape[2])
                    b = np.transpose(b, (1, 2, 0)).reshape(b.shape[1], -1)
            else:
                ours = by_module.get(f"{owner}.weight", f"{owner}.weight")
                a, b = lora[ours]
            module.lora_A["default"].weight.copy_(torch.from_numpy(a.copy()))
            module.lora_B["default"].weight.copy_(torch.from_numpy(b.copy()))
            done.add(ours)
    if done != set(lora):
        raise ValueError(f"PEFT adapted {sorted(done)[:3]}..., not the run's "
                         f"adapters {sorted(set(lora) - done)[:3]}")
    model.peft_config["default"].base_model_name_or_path = record["model"]
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    return out
