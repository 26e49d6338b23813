"""``python -m rp data|finetune|export``: the fine-tuning commands
(rp.data, rp.finetune, rp.export; docs/finetune.md)."""

from __future__ import annotations

import argparse
import json
import sys

from rp.finetune import DEFAULTS


def cmd_data(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp data",
        description="Tokenizes text or JSONL (text, prompt/completion, chat "
        "messages) once with a model folder's tokenizer into a dataset file "
        "for rp-run --dataset (docs/finetune.md); prints its header.")
    p.add_argument("src", help="a .jsonl (or .json: JSONL or an array) "
                   "file, or text (documents between blank lines)")
    p.add_argument("--tokenizer", required=True, metavar="MODEL_DIR",
                   help="a folder AutoTokenizer loads (a model folder)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.rpds")
    p.add_argument("--seq-len", type=int, required=True)
    p.add_argument("--pack", action="store_true",
                   help="fill rows with several documents (the segments "
                   "keep each document's attention its own in rp finetune's "
                   "graphs); default one document a row, padded")
    args = p.parse_args(argv)
    import os
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer
    from rp import data
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    info = data.build(args.src, tok, args.output, args.seq_len, args.pack)
    print(json.dumps(info))
    return 0


def _finetune_parser():
    p = argparse.ArgumentParser(
        prog="python -m rp finetune",
        description="Fine-tunes a local Hugging Face model folder on a text "
        "or JSONL file: tokenize, trace, compile, train (eval every K steps, "
        "best checkpoint kept), then `python -m rp export OUT --hf DIR`. "
        "Every option can also come from --config FILE.yaml; all are "
        "recorded in OUT/finetune.json.")
    p.add_argument("model", nargs="?", help="the model folder (config, "
                   "safetensors, tokenizer)")
    p.add_argument("--config", help="options as YAML or JSON (flags win)")
    p.add_argument("--data", help="training records (.jsonl, .json or text)")
    p.add_argument("--eval-data", help="evaluation records")
    p.add_argument("--out", help="the run folder")
    p.add_argument("--steps", type=int, help="optimizer steps (default: "
                   "--epochs; given with --epochs, --steps wins)")
    p.add_argument("--epochs", type=float, help="passes over the data "
                   "(default 1)")
    p.add_argument("--lr", type=float)
    p.add_argument("--lr-schedule", choices=["constant", "linear", "cosine"])
    p.add_argument("--warmup-steps", type=int)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--clip-grad-norm", type=float, help="0: off (default 1)")
    p.add_argument("--devices", type=int)
    p.add_argument("--microbatches", type=int, help="default: 1 on one "
                   "device, devices + 1 on more")
    p.add_argument("--batch-size", type=int, help="rows per microbatch")
    p.add_argument("--seq-len", type=int, help="tokens per row")
    p.add_argument("--pack", action=argparse.BooleanOptionalAction,
                   default=None, help="several documents a row, attention "
                   "kept within each (default); --no-pack: one a row, padded")
    p.add_argument("--shuffle-seed", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--lora-rank", type=int, help="train rank-R adapters "
                   "only (0: every weight)")
    p.add_argument("--lora-alpha", type=float)
    p.add_argument("--lora-targets", help="regex of the adapted weights "
                   "(default: every linear layer but the LM head)")
    p.add_argument("--lora-dropout", type=float, help="PEFT's lora_dropout "
                   "on the adapters' inputs (default 0), seeded by --seed "
                   "and the step: the same masks on any device count")
    p.add_argument("--lora-modules-to-save", help="regex of parameters "
                   "trained whole beside the adapters (PEFT's "
                   "modules_to_save), e.g. lm_head")
    p.add_argument("--quantize-base", choices=["none", "nf4", "int8"],
                   help="with --lora-rank: the frozen base stored NF4 "
                   "(QLoRA's) or int8 in host memory and every upload")
    p.add_argument("--dtype", choices=["f32", "bf16", "f16"])
    p.add_argument("--sync", action="store_true", default=None,
                   help="gradients of step k at W_k (default: async, the "
                   "loss of step k at step k-1's weights)")
    p.add_argument("--eval-every", type=int, help="steps between evals")
    p.add_argument("--save-every", type=int, help="also save "
                   "OUT/checkpoints/last every K steps (an eval saves it "
                   "too), for --resume")
    p.add_argument("--resume", metavar="OUT", help="go on with the run in "
                   "OUT from its last checkpoint to the steps it was "
                   "started for, with its recorded options (bitwise the "
                   "uninterrupted run)")
    p.add_argument("--threads", type=int)
    return p


def cmd_finetune(argv):
    args = _finetune_parser().parse_args(argv)
    from rp.finetune import finetune, load_config, resume
    if args.resume:
        given = [k for k in DEFAULTS if k != "threads" and
                 getattr(args, k, None) is not None] + \
            (["model"] if args.model else []) + \
            (["config"] if args.config else [])
        if given:
            print(f"rp finetune: error: --resume takes the options the run "
                  f"recorded (OUT/finetune.json); not "
                  f"{', '.join('--' + g.replace('_', '-') for g in given)}",
                  file=sys.stderr)
            return 1
        try:
            resume(args.resume, threads=args.threads)
        except (ValueError, FileNotFoundError) as e:
            print(f"rp finetune: error: {e}", file=sys.stderr)
            return 1
        return 0
    try:
        opts = load_config(args.config) if args.config else {}
    except ValueError as e:
        print(f"rp finetune: error: {e}", file=sys.stderr)
        return 1
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            opts[key] = value
    model = args.model or opts.pop("model", None)
    opts.pop("model", None)
    missing = [f for f, v in (("MODEL_DIR", model), ("--data", opts.get("data")),
                              ("--out", opts.get("out"))) if not v]
    if missing:
        print("rp finetune: error: give " + ", ".join(missing),
              file=sys.stderr)
        return 1
    data, out = opts.pop("data"), opts.pop("out")
    finetune(model, data, out, **opts)
    return 0


def cmd_export(argv):
    p = argparse.ArgumentParser(
        prog="python -m rp export",
        description="Writes a finetune run's weights (its last checkpoint, "
        "or the checkpoint folder given) as a transformers model (--hf, "
        "LoRA merged; --merged is the same), a PEFT adapter (--peft), or "
        "both.")
    p.add_argument("run", help="an rp finetune --out folder or a "
                   "checkpoint folder in one")
    p.add_argument("--hf", metavar="DIR")
    p.add_argument("--merged", metavar="DIR")
    p.add_argument("--peft", metavar="DIR")
    p.add_argument("--dtype", help="the exported weights' dtype (f32, "
                   "bf16, f16; default the model folder's own, f32 where "
                   "its config names none)")
    args = p.parse_args(argv)
    if not (args.hf or args.merged or args.peft):
        print("rp export: error: give --hf, --merged or --peft DIR",
              file=sys.stderr)
        return 1
    from rp import export
    for kind, out in (("hf", args.hf), ("merged", args.merged),
                      ("peft", args.peft)):
        if not out:
            continue
        if kind == "peft":
            path = export.export_peft(args.run, out)
        else:
            path = export.export_hf(args.run, out, args.dtype)
        print(f"rp export: {kind}: {path}", file=sys.stderr)
        print(path)
    return 0
