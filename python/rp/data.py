"""Pretokenized datasets: text and JSONL in, the file ``rp-run --dataset``
reads out (docs/finetune.md gives the format).

``rp.data.build(src, tokenizer, out, seq_len)`` tokenizes every record once
with the model's tokenizer:

* a text file (any name but ``.jsonl``/``.json``): documents separated by
  one or more blank lines (a line empty or of spaces and tabs only;
  ``\r\n`` line ends read as ``\n``, a UTF-8 byte-order mark dropped),
  each document's text stripped and followed by EOS, every token trained;
  a file without a blank line is one document (its lines are not records);
* a ``.jsonl`` file (or a ``.json`` file: JSONL, or one JSON array) of
  records, JSON objects with ``text`` (every token trained),
  ``prompt`` and ``completion`` (the completion trained), or chat
  ``messages`` (rendered with the tokenizer's chat template, the assistant
  turns trained).

Each row holds ``seq_len`` tokens and their labels: the next token where it
is trained, -100 (PyTorch's ignore index) on prompts, padding and a
document's last token, as rp never shifts labels. A text document longer
than a row goes on in the next rows, in pieces of ``seq_len`` tokens
(transformers' run_clm); one with a prompt or chat turns is cut at
``seq_len`` (a later piece would lose its prompt) and ``build`` counts what
was cut (``cut_documents``, ``cut_labels``). By default a row is one
document padded on the right: a causal model's tokens never attend to the
padding after them, so the loss is the document's alone. ``pack=True``
fills each row with whole documents instead, in order, a document that
does not fit the room left starting the next row (labels never cross a
document's end). The segments (each token's document in its row, -1 on
padding) go to the graph beside the tokens: ``rp.finetune``'s traced
models build a block-diagonal causal mask and per-document positions from
them, so a packed row's loss is its documents' alone too. Rows are read by rp-run in file order or in a seeded order per epoch,
which ``row_order`` reproduces.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, os.PathLike]

MAGIC = b"RPDSET01"
HEADER_BYTES = 64
IGNORE = -100
FLAG_PACKED = 1
# One or more blank lines: what separates a text file's documents. A line of
# spaces only counts, as an editor shows it blank.
_BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")


def read_records(src: PathLike) -> List[Dict[str, Any]]:
    """The records of a ``.jsonl`` file (a ``.json`` file's too, or its JSON
    array), or the blank-line-separated documents of a text file as
    ``{"text": ...}``."""
    src = Path(src)
    # utf-8-sig: a byte-order mark (Notepad's) is no part of the first record.
    text = src.read_text(encoding="utf-8-sig")
    if src.suffix in (".jsonl", ".json"):
        if text.lstrip().startswith("["):
            # A JSON array of records (Alpaca's and many datasets' .json).
            try:
                records = json.loads(text)
            except json.JSONDecodeError as err:
                raise ValueError(f"{src}: not a JSON array: {err}") from None
            numbered = list(enumerate(records, 1))
            where = "record"
        else:
            numbered = []
            for number, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        numbered.append((number, json.loads(line)))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{src}:{number}: not JSON: {err}") from None
            where = "line"
        for number, record in numbered:
            if not isinstance(record, dict):
                raise ValueError(f"{src}: {where} {number} is a JSON "
                                 f"{type(record).__name__}, not an object "
                                 "with 'text', 'prompt' and 'completion', or "
                                 "'messages'")
        return [record for _, record in numbered]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [{"text": block.strip()} for block in _BLANK_LINES.split(text)
            if block.strip()]


def _ids(tokenizer, text: str, special: bool) -> List[int]:
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def _eos(tokenizer) -> List[int]:
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []


def _chat(tokenizer, messages: List[Dict[str, str]]) -> Tuple[List[int], List[bool]]:
    """The rendered conversation and which tokens train: each assistant
    turn, found as what its message adds to the rendering before it."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("a 'messages' record needs a tokenizer with a chat "
                         "template (tokenizer_config.json's chat_template)")

    def render(part, generation):
        text = tokenizer.apply_chat_template(part, tokenize=False,
                                             add_generation_prompt=generation)
        return _ids(tokenizer, text, False)

    ids = render(messages, False)
    train = [False] * len(ids)
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        start = len(render(messages[:i], True))
        end = len(render(messages[:i + 1], False))
        for k in range(start, min(end, len(ids))):
            train[k] = True
    return ids, train


def encode(record: Dict[str, Any], tokenizer) -> Tuple[List[int], List[bool]]:
    """One record's tokens and which of them the loss predicts."""
    if "messages" in record:
        return _chat(tokenizer, record["messages"])
    if "prompt" in record and "completion" in record:
        prompt = _ids(tokenizer, record["prompt"], True)
        completion = _ids(tokenizer, record["completion"], False) + _eos(tokenizer)
        return prompt + completion, [False] * len(prompt) + [True] * len(completion)
    if "text" in record:
        ids = _ids(tokenizer, record["text"], True) + _eos(tokenizer)
        return ids, [True] * len(ids)
    raise ValueError(f"a record needs 'text', 'prompt' and 'completion', or "
                     f"'messages'; this one has {sorted(record)}")


def _labels(ids: Sequence[int], train: Sequence[bool]) -> List[int]:
    """Token j predicts token j+1 where j+1 trains; the last predicts
    nothing."""
    return [ids[j + 1] if train[j + 1] else IGNORE
            for j in range(len(ids) - 1)] + [IGNORE]


def _pieces(documents, seq_len: int, cut: Dict[str, int]):
    """The documents as rows take them: a text document (every token
    trained) longer than a row in consecutive pieces of ``seq_len`` tokens,
    each its own document (its attention and positions start anew, as in
    transformers' run_clm ``group_texts``), a piece's last token predicting
    the next piece's first, so no label is lost; one with an untrained
    prompt cut at ``seq_len`` (a later piece would train without its
    prompt). Both counted in ``cut``."""
    for ids, train in documents:
        ids, train = list(ids), list(train)
        if len(ids) <= seq_len + 1:
            yield ids, train
        elif all(train):
            cut["continued"] += 1
            for at in range(0, len(ids) - 1, seq_len):
                # One token past the piece: its last label.
                yield ids[at:at + seq_len + 1], train[at:at + seq_len + 1]
        else:
            cut["documents"] += 1
            cut["labels"] += sum(1 for v in _labels(ids, train)[seq_len:]
                                 if v != IGNORE)
            yield ids[:seq_len + 1], train[:seq_len + 1]


def rows_from(documents: Iterable[Tuple[List[int], List[bool]]], seq_len: int,
              pad_id: int, pack: bool = False,
              cut: Optional[Dict[str, int]] = None):
    """tokens, labels and segments ([rows, seq_len] int32) of the documents:
    one padded row each, or packed. A text document longer than a row
    continues in the next rows (counted in ``cut["continued"]``); one with a
    prompt is cut at ``seq_len`` (``cut["documents"]``, the ``labels``
    lost)."""
    tokens, labels, segments = [], [], []
    row_t, row_l, row_s = [], [], []
    if cut is None:
        cut = {}
    cut.setdefault("continued", 0)
    cut.setdefault("documents", 0)
    cut.setdefault("labels", 0)
    documents = _pieces(documents, seq_len, cut)

    def flush():
        fill = seq_len - len(row_t)
        tokens.append(row_t + [pad_id] * fill)
        labels.append(row_l + [IGNORE] * fill)
        segments.append(row_s + [-1] * fill)

    docs = 0
    for ids, train in documents:
        ids, train = list(ids)[:seq_len + 1], list(train)[:seq_len + 1]
        lab = _labels(ids, train)[:seq_len]
        ids = ids[:seq_len]
        if len(ids) < 2 or all(v == IGNORE for v in lab):
            continue
        docs += 1
        if not pack:
            row_t, row_l, row_s = ids, lab, [0] * len(ids)
            flush()
            row_t, row_l, row_s = [], [], []
            continue
        # Documents stay whole: one that does not fit the room left starts
        # the next row (a part cut off would train without its prompt), so
        # only a document longer than a row is cut, as padded rows cut it.
        if len(row_t) + len(ids) > seq_len:
            flush()
            row_t, row_l, row_s = [], [], []
        segment = (row_s[-1] + 1) if row_s else 0
        row_t += ids
        row_l += lab
        row_s += [segment] * len(ids)
        if len(row_t) == seq_len:
            flush()
            row_t, row_l, row_s = [], [], []
    if row_t:
        flush()
    as_array = lambda rows: np.asarray(rows, dtype=np.int32).reshape(-1, seq_len)
    return as_array(tokens), as_array(labels), as_array(segments), docs


def write(out: PathLike, tokens: np.ndarray, labels: np.ndarray,
          segments: np.ndarray, documents: int, vocab: int = 0,
          packed: bool = False) -> Path:
    """Writes the dataset file: the 64-byte header, then tokens, labels and
    segments, int32 little-endian, row after row."""
    rows, seq_len = tokens.shape
    header = MAGIC + struct.pack("<IIQQQQ", seq_len,
                                 FLAG_PACKED if packed else 0, rows,
                                 documents, vocab,
                                 int((labels != IGNORE).sum()))
    header += b"\0" * (HEADER_BYTES - len(header))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(header)
        for a in (tokens, labels, segments):
            f.write(np.ascontiguousarray(a, dtype="<i4").tobytes())
    os.replace(tmp, out)
    return out


def read(path: PathLike) -> Dict[str, Any]:
    """A dataset file's header fields and its arrays."""
    raw = Path(path).read_bytes()
    if raw[:8] != MAGIC:
        raise ValueError(f"{path} is not an rp dataset (no {MAGIC!r} header)")
    seq_len, flags, rows, documents, vocab, trained = struct.unpack_from(
        "<IIQQQQ", raw, 8)
    cells = rows * seq_len
    arrays = np.frombuffer(raw, dtype="<i4", offset=HEADER_BYTES,
                           count=3 * cells).reshape(3, rows, seq_len)
    return {"seq_len": seq_len, "packed": bool(flags & FLAG_PACKED),
            "rows": rows, "documents": documents, "vocab": vocab,
            "trained_tokens": trained, "tokens": arrays[0],
            "labels": arrays[1], "segments": arrays[2]}


def build(src: PathLike, tokenizer, out: PathLike, seq_len: int,
          pack: bool = False) -> Dict[str, Any]:
    """Tokenizes ``src`` (text or JSONL) into the dataset file ``out``;
    returns its header fields."""
    records = read_records(src)
    pad = tokenizer.pad_token_id
    if pad is None:
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    cut: Dict[str, int] = {}
    tokens, labels, segments, docs = rows_from(
        (encode(r, tokenizer) for r in records), seq_len, pad, pack, cut)
    if len(tokens) == 0:
        raise ValueError(
            f"{src}: no record has a token to train on" +
            (f" within {seq_len} tokens ({cut['documents']} record(s) with a "
             f"prompt cut at the row's end); raise --seq-len"
             if cut["documents"] else ""))
    write(out, tokens, labels, segments, docs, len(tokenizer), pack)
    info = read(out)
    info = {k: v for k, v in info.items()
            if k not in ("tokens", "labels", "segments")}
    info["records"] = len(records)
    info["continued_documents"] = cut["continued"]
    info["cut_documents"], info["cut_labels"] = cut["documents"], cut["labels"]
    return info


_MASK = (1 << 64) - 1


def _splitmix(state: int) -> Tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


def row_order(rows: int, seed: Optional[int], epoch: int) -> List[int]:
    """The order rp-run reads the rows of ``epoch`` in (``--shuffle-seed
    seed``; None: the file's order)."""
    order = list(range(rows))
    if seed is None:
        return order
    state = (seed ^ (epoch * 0xD1B54A32D192ED03)) & _MASK
    for i in range(rows - 1, 0, -1):
        state, r = _splitmix(state)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def batch_rows(rows: int, batch: int, step: int, seed: Optional[int],
               world: int = 1) -> List[int]:
    """The rows of step ``step``'s global batch of ``batch`` rows."""
    out = []
    for position in range(step * batch * world, (step + 1) * batch * world):
        out.append(row_order(rows, seed, position // rows)[position % rows])
    return out
