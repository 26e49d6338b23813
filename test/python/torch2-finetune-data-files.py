# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# A text file's documents are separated by blank lines: one or more, a line
# of spaces or tabs counting as blank, CRLF line ends and a UTF-8
# byte-order mark (a file saved by Notepad) read as a user sees them. Each
# document is one record, its tokens followed by EOS: padded, one row each;
# packed, the documents in order with EOS between, no label crossing from a
# document's EOS into the next. Before, only "\n\n" split: a blank line of
# spaces or a CRLF file gave one document, and the BOM was trained as text.
# A .json file may be one JSON array of records (Alpaca's form) as well as
# JSONL; before, its "[" line was "not JSON". A record that is no JSON
# object is refused by its place (a string was searched for "text" as a
# substring before).

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "Inputs"))
from finetune_check import make_model  # noqa: E402

from transformers import AutoTokenizer  # noqa: E402

from rp import data  # noqa: E402

out = Path(sys.argv[1])
tok = AutoTokenizer.from_pretrained(str(make_model(out / "tiny")))
docs = ["After one comes two.\nAfter two comes three.", "Four.",
        "Five comes after four.", "  Six is last."]
lf = out / "lf.txt"
lf.write_text(f"{docs[0]}\n\n{docs[1]}\n  \t\n{docs[2]}\n\n\n\n{docs[3]}\n\n",
              encoding="utf-8")
crlf = out / "crlf.txt"
crlf.write_bytes(("\ufeff" + "\r\n\r\n".join(docs) + "\r\n").encode("utf-8"))
want = [d.strip() for d in docs]
for src in (lf, crlf):
    got = [r["text"] for r in data.read_records(src)]
    print(f"{src.name}: {len(got)} documents, as written: {got == want}")

expect = [tok(d)["input_ids"] + [tok.eos_token_id] for d in want]
info = data.build(lf, tok, out / "padded.rpds", 40)
d = data.read(out / "padded.rpds")
rows = [[int(t) for t, s in zip(d["tokens"][r], d["segments"][r]) if s >= 0]
        for r in range(d["rows"])]
print(f"padded: {info['rows']} rows, {info['documents']} documents, "
      f"each its text + EOS: {rows == expect}")

info = data.build(crlf, tok, out / "packed.rpds", 40, pack=True)
p = data.read(out / "packed.rpds")
stream, labels, seg = [], [], []
for r in range(p["rows"]):
    for t, lab, s in zip(p["tokens"][r], p["labels"][r], p["segments"][r]):
        if s >= 0:
            stream.append(int(t))
            labels.append(int(lab))
            seg.append((r, int(s)))
eos_at = [j for j, t in enumerate(stream) if t == tok.eos_token_id]
print(f"packed: {info['documents']} documents in {info['rows']} rows, "
      f"in order with EOS between: {stream == sum(expect, [])}, "
      f"EOS labels ignored: {all(labels[j] == -100 for j in eos_at)}, "
      f"a segment each: {len(set(seg)) == len(docs)}")

records = [{"prompt": "What comes after two? ", "completion": "three."},
           {"text": "After one comes two."}]
array = out / "array.json"
array.write_text(json.dumps(records, indent=1))
lines = out / "lines.json"
lines.write_text("".join(json.dumps(r) + "\n" for r in records))
print("json array:", data.read_records(array) == records,
      "json lines:", data.read_records(lines) == records)
bad = out / "bad.jsonl"
bad.write_text(json.dumps(records[0]) + "\n" + json.dumps("a text") + "\n")
try:
    data.read_records(bad)
except ValueError as err:
    print("not an object:", str(err).replace(str(out), "OUT"))

# CHECK: lf.txt: 4 documents, as written: True
# CHECK-NEXT: crlf.txt: 4 documents, as written: True
# CHECK-NEXT: padded: 4 rows, 4 documents, each its text + EOS: True
# CHECK-NEXT: packed: 4 documents in {{[0-9]+}} rows, in order with EOS between: True, EOS labels ignored: True, a segment each: True
# CHECK-NEXT: json array: True json lines: True
# CHECK-NEXT: not an object: OUT/bad.jsonl: line 2 is a JSON str, not an object with 'text', 'prompt' and 'completion', or 'messages'
