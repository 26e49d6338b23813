"""``rp.finetune``: a Hugging Face model folder and a dataset in, a trained
run folder out (``python -m rp finetune``, docs/finetune.md).

The steps, each the tool a user could run alone:

1. the model folder loads with transformers (config, safetensors, tokenizer),
   its KV cache off; ``rp.trace`` writes its graph with the model's own
   parameter names (``model.layers.0.self_attn.q_proj.weight``);
2. ``rp.data.build`` tokenizes the training (and eval) records once into
   dataset files;
3. ``rp-compile`` makes the plan (devices, microbatches, LoRA, dtype);
4. ``rp-run --dataset`` trains; with eval data, ``rp-run --eval-dataset
   --eval-every K --save-best`` computes the eval loss every K steps at the
   master weights in the same process (bitwise the run without evals) and
   keeps the best checkpoint;
5. ``OUT/finetune.json`` records every option, so a run is reproducible, and
   ``python -m rp export OUT --hf|--peft|--merged DIR`` writes the model.

OUT holds ``train.rpds``/``eval.rpds``, ``trace/`` (graph, weights),
``model.rpplan``, ``checkpoints/last`` and ``checkpoints/best``,
``metrics.jsonl`` (a line per step from rp-run, a line per evaluation) and
``tensorboard/`` (the same as TensorBoard event files, with tensorboardX).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Union

from rp import data as rp_data
# load_model is also rp.finetune's API (tests and scripts call it here).
from rp._hf_folder import check_model_folder, load_model
from rp.driver import compile as rp_compile
from rp.driver import train_steps
from rp.export import plan_lora

PathLike = Union[str, os.PathLike]

# Every option, its default (Hugging Face Trainer's where it has one).
DEFAULTS: Dict[str, Any] = {
    "data": None, "eval_data": None, "out": None,
    "steps": None, "epochs": None,
    "lr": 5e-5, "lr_schedule": "linear", "warmup_steps": 0,
    "weight_decay": 0.0, "clip_grad_norm": 1.0, "optimizer": "adamw",
    "devices": 1, "microbatches": None, "batch_size": 1, "seq_len": 128,
    "pack": True, "shuffle_seed": 0, "seed": 0,
    "lora_rank": 0, "lora_alpha": 16.0, "lora_targets": "",
    "lora_modules_to_save": "", "quantize_base": None, "lora_dropout": 0.0,
    "dtype": "f32", "sync": False, "eval_every": 0, "save_every": 0,
    "threads": None,
}


def load_config(path: PathLike) -> Dict[str, Any]:
    """A ``finetune.yaml`` (or ``.json``): option names as the Python
    keywords (``lora_rank``) or the flags (``lora-rank``)."""
    text = Path(path).read_text()
    if str(path).endswith(".json"):
        raw = json.loads(text)
    else:
        import yaml
        raw = yaml.safe_load(text) or {}
    out = {}
    for key, value in raw.items():
        key = key.replace("-", "_")
        if key not in DEFAULTS and key != "model":
            raise ValueError(f"{path}: unknown option '{key}'; options: "
                             + ", ".join(sorted(DEFAULTS)))
        out[key] = _typed(path, key, value)
    return out


# The options whose default is None, by type (the others: their default's).
_NUMBER_TYPES = {"steps": int, "epochs": float, "microbatches": int,
                 "threads": int}


def _typed(path, key: str, value):
    """A config value as its option's type, as the flag would parse it:
    YAML 1.1 reads `lr: 3e-3` (no dot) as the string '3e-3', which rp-run
    would be handed as is."""
    kind = _NUMBER_TYPES.get(key, type(DEFAULTS.get(key)))
    if value is None or kind not in (int, float, bool):
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{path}: {key} is {value!r}, not true or false")
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: {key} is {value!r}, not a number") from None
    if kind is int:
        if number != int(number):
            raise ValueError(f"{path}: {key} is {value!r}, not a whole "
                             "number")
        return int(number)
    return number


def _logits_module(model):
    """The model's children under the model's own names, whose forward is
    the model's with the cache off, returning the logits alone. It takes
    each token's document (``segment_ids``, the dataset's segments, -1 on
    padding) beside the tokens: a token attends to the tokens before it in
    its own document only, at its position within that document, so a
    packed row computes what its documents would alone, as a padded one
    does. The attention gets the segments themselves (rp._segments: the
    model's attention layers run ``rp_trace::segment_attention``, which
    rp.attention takes as an i64 [batch, seq] mask), so no S x S mask
    exists in the graph."""
    import torch

    from rp import _segments
    _segments.register()

    class LogitsOnly(torch.nn.Module):
        def forward(self, input_ids, segment_ids):
            positions = _segments.positions(segment_ids)
            config = self._model.config
            saved = config._attn_implementation
            config._attn_implementation = _segments.IMPLEMENTATION
            _segments.CURRENT = segment_ids
            try:
                return self._model(input_ids=input_ids,
                                   position_ids=positions, use_cache=False,
                                   return_dict=False,
                                   rp_segments=segment_ids)[0]
            finally:
                config._attn_implementation = saved
                _segments.CURRENT = None

    wrapper = LogitsOnly()
    for name, child in model.named_children():
        setattr(wrapper, name, child)
    # Not a submodule: parameter names stay the model's own.
    object.__setattr__(wrapper, "_model", model)
    return wrapper


class _RotaryTables:
    """While tracing: each rotary embedding (a module with
    ``forward(x, position_ids) -> (cos, sin)``, as transformers' Llama,
    Qwen3 and Mixtral have) computes its tables for positions 0..S-1,
    input-independent so the tracer folds them, and gathers the rows of the
    given positions; rp has no cos/sin kernel for positions computed at run
    time. The values are the module's own (the same float ops per position),
    so traced and eager models agree."""

    def __init__(self, model):
        self.model, self.saved = model, []

    def __enter__(self):
        import types

        import torch
        import torch.nn.functional as F

        def forward(module, x, position_ids):
            base = torch.arange(position_ids.shape[-1],
                                device=position_ids.device)[None]
            cos, sin = module._rp_forward(x, base)
            return (F.embedding(position_ids, cos[0]),
                    F.embedding(position_ids, sin[0]))

        for name, module in self.model.named_modules():
            if type(module).__name__.endswith("RotaryEmbedding"):
                module._rp_forward = module.forward
                module.forward = types.MethodType(forward, module)
                self.saved.append(module)
        return self

    def __exit__(self, *exc):
        for module in self.saved:
            del module.forward
            del module._rp_forward


def _say_cut(path, info, seq: int) -> None:
    """What rows longer than --seq-len did to the records: text continued
    over rows, prompts and chats cut (their lost labels: nothing else says
    the data was not all trained on)."""
    if info["continued_documents"]:
        _say(f"{path}: {info['continued_documents']} text document(s) longer "
             f"than {seq} tokens continue over several rows (a .txt file's "
             "documents are separated by blank lines)")
    if info["cut_documents"]:
        _say(f"{path}: warning: {info['cut_documents']} record(s) with a "
             f"prompt are longer than {seq} tokens and were cut, "
             f"{info['cut_labels']} trained tokens lost; raise --seq-len")


def trace_model(model, batch: int, seq: int, out: PathLike) -> Path:
    """``rp.trace`` of the model's logits from ``input_ids`` and
    ``segment_ids`` ([batch, seq] each), the model's own parameter names."""
    import torch
    from rp.trace import trace
    example = torch.zeros((batch, seq), dtype=torch.int64)
    from rp import _segments
    was = _segments.dropout_off(model)
    if was:
        _say(f"the model's dropout is off ({', '.join(was[:3])}"
             + (f" and {len(was) - 3} more" if len(was) > 3 else "")
             + "): rp traces no random ops, so it fine-tunes without dropout "
             "(the exported config keeps the model's values)")
    with _RotaryTables(model):
        return trace(_logits_module(model), (example, example.clone()), out)


class _Board:
    """TensorBoard event files in OUT/tensorboard from metrics.jsonl, with
    tensorboardX (pinned in the torch-2 venv) where it imports; the lines
    of the file not written yet go in after each stretch of steps."""

    def __init__(self, folder: Path, metrics: Path):
        self.metrics, self.done, self.writer = metrics, 0, None
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            _say("no tensorboardX: metrics.jsonl only (scripts/setup.sh "
                 "installs it in .venv-torch2)")
            return
        # metrics.jsonl is the record (a fresh run empties it, a resume drops
        # the lines after its checkpoint), and every line of it goes in
        # again: the event files of an earlier run or of the steps before a
        # resume would show twice, interleaved, as TensorBoard reads all.
        for old in folder.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(str(folder))

    def update(self) -> None:
        if self.writer is None or not self.metrics.exists():
            return
        lines = self.metrics.read_text().splitlines()
        for line in lines[self.done:]:
            m = json.loads(line)
            for key, tag in (("loss", "train/loss"), ("lr", "train/lr"),
                             ("grad_norm", "train/grad_norm"),
                             ("eval_loss", "eval/loss")):
                if m.get(key) is not None:
                    self.writer.add_scalar(tag, m[key], m["step"])
        self.done = len(lines)
        self.writer.flush()

    def close(self) -> None:
        # Drains tensorboardX's writer thread (flush alone may not).
        if self.writer is not None:
            self.writer.close()


def _stamp(checkpoint: Path, record: Dict[str, Any], done: int) -> None:
    """What a checkpoint alone needs to be exported (rp.export reads it
    where the checkpoint folder was copied away from its run): the model
    folder, the LoRA settings, and which weights are current. rp-run
    replaces the folder when it saves, so this follows every save."""
    quantized = (record["lora"] or {}).get("quantize_base")
    (checkpoint / "run.json").write_text(json.dumps({
        "model": record["model"], "lora": record["lora"],
        # A quantized base is read back from the run's plan (rp.export).
        **({"plan": str((checkpoint.parent.parent / record["plan"])
                        .resolve())} if quantized else {}),
        "steps_done": done,
        "current_weights": "weights.safetensors (the master weights after "
                           f"{done} updates; what a resumed run continues)",
        "compute_weights": "compute.safetensors (what the next step computes "
                           "with: one update older in async mode)",
    }, indent=2) + "\n")


def _say(text: str) -> None:
    print(f"rp finetune: {text}", file=sys.stderr, flush=True)


def _pad_rows(path: Path, multiple: int) -> None:
    """Fills an eval dataset with empty rows (every label ignored) to a
    whole number of global batches, so no row is read twice."""
    d = rp_data.read(path)
    rows = d["rows"]
    extra = (-rows) % multiple
    if not extra:
        return
    import numpy as np
    pad = lambda a, v: np.concatenate(
        [a, np.full((extra, d["seq_len"]), v, dtype=np.int32)])
    rp_data.write(path, pad(d["tokens"], 0), pad(d["labels"], -100),
                  pad(d["segments"], -1), d["documents"], d["vocab"],
                  d["packed"])


def evaluate(plan: PathLike, weights: PathLike, dataset: PathLike,
             global_rows: int, threads: Optional[int] = None) -> float:
    """The token-weighted mean loss over every row of ``dataset`` at
    ``weights`` (a checkpoint's ``weights.safetensors``): rp-run in sync
    mode with a learning rate of 0, one step per global batch, without LoRA
    dropout (PEFT's eval mode)."""
    d = rp_data.read(dataset)
    steps = d["rows"] // global_rows
    counts = [(d["labels"][s * global_rows:(s + 1) * global_rows] != -100).sum()
              for s in range(steps)]
    total = weighted = 0.0
    for (_, loss), count in zip(
            train_steps(plan, steps=steps, lr=0.0, sync=True,
                        dataset=str(dataset), init_weights=str(weights),
                        weight_decay=0.0, no_dropout=True,
                        threads=threads), counts):
        weighted += loss * float(count)
        total += float(count)
    return weighted / total


def finetune(model_dir: PathLike, data: PathLike, out: PathLike,
             _stop_after: Optional[int] = None, **options) -> Dict[str, Any]:
    """Fine-tunes the Hugging Face model folder ``model_dir`` on ``data``
    (text or JSONL) into the run folder ``out``; options as DEFAULTS (and
    ``python -m rp finetune --help``). Returns the run's record (also in
    ``out/finetune.json``)."""
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}; options: "
                         + ", ".join(sorted(DEFAULTS)))
    opts = dict(DEFAULTS)
    opts.update({k: (str(v) if isinstance(v, os.PathLike) else v)
                 for k, v in options.items() if v is not None})
    opts["data"], opts["out"] = str(data), str(out)
    for flag, path in (("data", data), ("eval_data", opts["eval_data"])):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{path}: no such file ({flag}: the records, "
                             ".jsonl, .json or text)")
    check_model_folder(model_dir)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    import torch
    torch.manual_seed(opts["seed"])

    model, tokenizer = load_model(model_dir)
    seq, b = int(opts["seq_len"]), int(opts["batch_size"])
    devices = int(opts["devices"])
    M = int(opts["microbatches"] or (1 if devices == 1 else devices + 1))
    global_rows = M * b

    train_info = rp_data.build(data, tokenizer, out / "train.rpds", seq,
                               opts["pack"])
    _say(f"{data}: {train_info['documents']} documents in "
         f"{train_info['rows']} rows of {seq} tokens, "
         f"{train_info['trained_tokens']} trained tokens -> {out}/train.rpds"
         + (" (packed; attention kept within each document)"
            if opts["pack"] else " (one document a row, padded)"))
    _say_cut(data, train_info, seq)
    eval_path = None
    if opts["eval_data"]:
        eval_path = out / "eval.rpds"
        info = rp_data.build(opts["eval_data"], tokenizer, eval_path, seq)
        _pad_rows(eval_path, global_rows)
        _say(f"{opts['eval_data']}: {info['rows']} rows -> {eval_path}")
        _say_cut(opts["eval_data"], info, seq)
    # --steps beside --epochs wins (as Hugging Face's Trainer's max_steps
    # over num_train_epochs); the summary line says so.
    beside = opts["epochs"] if opts["steps"] and opts["epochs"] else None
    if opts["steps"]:
        total = int(opts["steps"])
    else:
        epochs = float(opts["epochs"] or 1)
        total = max(1, math.ceil(epochs * train_info["rows"] / global_rows))
    opts["steps"] = total

    src = trace_model(model, b, seq, out / "trace")
    plan_options = {"dtype": opts["dtype"] if opts["dtype"] != "f32" else None}
    if opts["lora_rank"]:
        plan_options.update(lora_rank=opts["lora_rank"],
                            lora_alpha=opts["lora_alpha"],
                            lora_targets=opts["lora_targets"] or None,
                            lora_modules_to_save=(opts["lora_modules_to_save"]
                                                  or None),
                            quantize_base=opts["quantize_base"],
                            lora_dropout=opts["lora_dropout"] or None)
    elif opts["quantize_base"] not in (None, "none"):
        raise ValueError("quantize_base stores the frozen base of a LoRA "
                         "run quantized: give lora_rank too")
    plan = rp_compile(src, out / "model.rpplan", devices=devices,
                      microbatches=M, **plan_options)
    _say(f"compiled {plan} for {devices} device(s), {M} microbatch(es) of "
         f"{b} x {seq} tokens"
         + (f", LoRA rank {opts['lora_rank']} alpha {opts['lora_alpha']}"
            + (f" dropout {opts['lora_dropout']}" if opts["lora_dropout"]
               else "")
            if opts["lora_rank"] else ", every weight trained")
         + (f", the frozen base {opts['quantize_base']}"
            if opts["quantize_base"] not in (None, "none") else ""))

    record = {"model": str(Path(model_dir).resolve()), "options": opts,
              "plan": "model.rpplan", "trace": "trace/model.mlir",
              "global_batch_rows": global_rows, "microbatches": M,
              # What the plan records (rp.export reads it from there).
              "lora": plan_lora(plan),
              "current_weights": "checkpoints/last/weights.safetensors",
              "steps_beside_epochs": beside, "evals": []}
    if opts["quantize_base"] not in (None, "none"):
        # The export dequantizes the base from the plan's blobs.
        record["lora"]["quantize_base"] = opts["quantize_base"]
    (out / "finetune.json").write_text(json.dumps(record, indent=2) + "\n")
    last = out / "checkpoints" / "last"
    if last.exists():
        shutil.rmtree(last)
    last.parent.mkdir(parents=True, exist_ok=True)
    (out / "metrics.jsonl").unlink(missing_ok=True)
    best = out / "checkpoints" / "best"
    if best.exists():
        shutil.rmtree(best)
    return _train(out, record, train_info["rows"], 0, _stop_after)


def resume(out: PathLike, threads: Optional[int] = None,
           _stop_after: Optional[int] = None) -> Dict[str, Any]:
    """Goes on with the finetune run in ``out`` from its last checkpoint
    (``save_every``'s, an eval's, or the end's) to the steps it was started
    for, with the options it recorded (``finetune.json``): rp-run's
    ``--resume`` takes the schedule, seeds and data position from the
    checkpoint, so the run ends as the uninterrupted one would, bitwise.
    Metrics after the checkpoint (written before it stopped) are dropped and
    written again."""
    out = Path(out)
    record = json.loads((out / "finetune.json").read_text())
    opts = record["options"]
    if threads is not None:
        opts["threads"] = threads
    last = out / "checkpoints" / "last"
    state_path = last / "state.json"
    if not state_path.is_file():
        raise ValueError(f"{out}: no checkpoint to resume ({state_path} is "
                         "missing: the run stopped before its first save; "
                         "give save_every to save every K steps)")
    done = int(json.loads(state_path.read_text())["step"])
    total = int(opts["steps"])
    if done >= total:
        _say(f"{out}: all {total} steps are done; nothing to resume")
        return record
    metrics = out / "metrics.jsonl"
    if metrics.exists():
        kept = [line for line in metrics.read_text().splitlines()
                if _before(json.loads(line), done)]
        metrics.write_text("".join(line + "\n" for line in kept))
    rows = rp_data.read(out / "train.rpds")["rows"]
    _say(f"resuming {out} after {done} of {total} steps")
    return _train(out, record, rows, done, _stop_after)


def _before(line: Dict[str, Any], done: int) -> bool:
    """A metrics line of the steps a checkpoint after ``done`` updates
    holds (an eval's after at most ``done``)."""
    if "eval_loss" in line:
        return line["after_updates"] <= done
    return line["step"] < done


def _train(out: Path, record: Dict[str, Any], rows: int, start: int,
           stop_after: Optional[int]) -> Dict[str, Any]:
    """rp-run over the run's steps from ``start`` (a resume of
    checkpoints/last when not 0) to its end (or ``stop_after``: an
    interruption, for tests), then the evals, the best checkpoint and the
    record."""
    opts = record["options"]
    total = int(opts["steps"])
    global_rows = record["global_batch_rows"]
    plan = out / record["plan"]
    last, best = out / "checkpoints" / "last", out / "checkpoints" / "best"
    metrics = out / "metrics.jsonl"
    eval_path = out / "eval.rpds" if opts["eval_data"] else None
    every = int(opts["eval_every"]) if eval_path else 0
    board = _Board(out / "tensorboard", metrics)
    best_loss = math.inf
    end = total if stop_after is None else min(total, stop_after)
    beside = record.get("steps_beside_epochs")
    _say(f"training {total} steps of {global_rows} rows "
         f"({total * global_rows / rows:.2f} epochs"
         + (f": --steps {total} wins over --epochs {beside:g}, which is "
            "ignored" if beside else "") + "; "
         f"{opts['lr_schedule']} schedule from lr {opts['lr']}, "
         f"{opts['warmup_steps']} warmup steps, "
         + ("sync" if opts["sync"] else "async") + " mode)"
         + (f", eval every {every} steps" if every else "")
         + (f", from step {start}" if start else ""))
    flags = dict(dataset=str(out / "train.rpds"), save=str(last),
                 lr_schedule=opts["lr_schedule"],
                 warmup_steps=opts["warmup_steps"], total_steps=total,
                 metrics=str(metrics), seed=opts["seed"],
                 weight_decay=opts["weight_decay"],
                 clip_grad_norm=opts["clip_grad_norm"] or None,
                 save_every=opts.get("save_every") or None,
                 threads=opts["threads"])
    if start:
        flags["resume"] = str(last)
    if opts["shuffle_seed"] is not None:
        flags["shuffle_seed"] = opts["shuffle_seed"]
    # A resumed rp-run knows only its own evals: it keeps its best beside
    # the run's, which it replaces only if lower than every eval before.
    earlier = min((m["eval_loss"] for m in map(
        json.loads, metrics.read_text().splitlines()) if "eval_loss" in m),
        default=math.inf) if start and metrics.exists() else math.inf
    candidate = best.with_name("best.resumed") if start else best
    if eval_path:
        # rp-run evaluates in its own process (every `every` steps and at
        # the end), keeping the best checkpoint.
        if candidate.exists():
            shutil.rmtree(candidate)
        flags.update(eval_dataset=str(eval_path), eval_every=every or None,
                     save_best=str(candidate))
    for step, loss in train_steps(plan, steps=end - start, lr=opts["lr"],
                                  optimizer=opts["optimizer"],
                                  sync=opts["sync"], progress="steps",
                                  **flags):
        pass
    done = end
    _stamp(last, record, done)
    if candidate != best and candidate.exists():
        ours = min((m["eval_loss"] for m in map(
            json.loads, metrics.read_text().splitlines())
            if "eval_loss" in m and m["after_updates"] > start),
            default=math.inf)
        if ours < earlier:
            if best.exists():
                shutil.rmtree(best)
            candidate.rename(best)
        else:
            shutil.rmtree(candidate)
    evals = [m for m in map(json.loads, metrics.read_text().splitlines())
             if "eval_loss" in m]
    record["evals"] = []
    record.pop("best", None)
    for m in evals:
        loss, after = m["eval_loss"], m["after_updates"]
        record["evals"].append({"steps_done": after, "eval_loss": loss})
        if loss < best_loss:
            best_loss = loss
            record["best"] = {"steps_done": after, "eval_loss": loss,
                              "weights": "checkpoints/best/weights.safetensors"}
    if "best" in record:
        _stamp(best, record, record["best"]["steps_done"])
        # rp-run said each eval as it came; the summary once.
        _say(f"{len(evals)} evals, the last {evals[-1]['eval_loss']:.6f}; "
             f"the best {best_loss:.6f} after {record['best']['steps_done']} "
             "steps (checkpoints/best)")
    board.update()
    record["steps_done"] = done
    (out / "finetune.json").write_text(json.dumps(record, indent=2) + "\n")
    board.close()
    if done < total:
        _say(f"stopped after {done} of {total} steps; go on with python -m "
             f"rp finetune --resume {out}")
        return record
    _say(f"done: {out}/checkpoints/last after {done} steps; export with "
         f"python -m rp export {out} --hf DIR"
         + (" or --peft DIR" if opts["lora_rank"] else ""))
    return record
