"""A local Hugging Face model folder: refused in rp's words when it is none,
loaded with transformers when it is one. Shared by ``rp.finetune`` (which
trains from it) and ``rp.export`` (which writes the trained weights back
into it), so that neither imports the other for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union

PathLike = Union[str, os.PathLike]


def check_model_folder(model_dir: PathLike) -> None:
    """Refuses what is no local model folder, in rp's words: transformers
    takes a path that is no folder for a hub name ("Repo id must be in the
    form 'repo_name'...")."""
    folder = Path(model_dir)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder; rp takes a local Hugging "
                         "Face model folder (config.json, safetensors "
                         "weights, tokenizer files: what save_pretrained "
                         "writes); for a hub model, download it first "
                         "(huggingface-cli download NAME --local-dir DIR)")
    if not (folder / "config.json").is_file():
        raise ValueError(f"{folder} has no config.json: not a Hugging Face "
                         "model folder (what save_pretrained writes)")


def load_model(model_dir: PathLike):
    """The model (f32, eval mode, cache off) and tokenizer of a local
    folder; nothing is fetched from a hub."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    check_model_folder(model_dir)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir),
                                                 dtype=torch.float32)
    model.config.use_cache = False
    model.eval()
    return model, tokenizer
