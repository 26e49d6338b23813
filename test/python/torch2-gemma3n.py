# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: env HF_HUB_OFFLINE=1 %TORCH2_PYTHON %s %t | FileCheck %s

# Gemma 3n's causal LM as transformers 5.24 maps it
# (Gemma3nForConditionalGeneration, bench/families.py's shrunk config) on
# token ids alone: gemma3n_text's model inside the multimodal wrapper, which
# embeds every token three ways (text, and the vision and audio embedders
# on ids clamped into their ranges) and picks by masks of the ids. It
# builds only with timm installed (its vision tower is a TimmWrapperModel;
# scripts/torch2-requirements.txt pins timm). The default tower
# (mobilenetv5_300m_enc, 294M parameters that the shrink rule cannot reach
# and the text path never runs) is swapped for timm's test_efficientnet so
# the test takes seconds. Checked on each path as bench/families.py checks
# it: the loss within 1e-4 of PyTorch's, every gradient by its parameter
# name within 1e-4 (the ONNX paths told the embeddings' padding rows), 4
# devices bitwise equal to 1.

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "Inputs"))
import family_paths_check  # noqa: E402
from family_paths_check import families  # noqa: E402


def small_tower(config):
    config.vision_config.architecture = "test_efficientnet"


out = Path(sys.argv[1])
model = families.build("gemma3n", small_tower)
print(type(model.lm).__name__)
# CHECK: Gemma3nForConditionalGeneration
family_paths_check.check_paths(model, out, families.PATHS)
# CHECK: trace: loss True, 86 of 86 gradients within 1e-4, 4 devices bitwise True
# CHECK: torchscript: loss True, 86 of 86 gradients within 1e-4, 4 devices bitwise True
# CHECK: dynamo: loss True, 86 of 86 gradients within 1e-4, 4 devices bitwise True
