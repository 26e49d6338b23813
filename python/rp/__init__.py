"""rp: trace PyTorch modules into rp and drive its tools from Python.

``rp.trace`` writes the rp graph of a module; ``rp.compile``, ``rp.train``
and ``rp.opt`` are a thin layer over the command-line tools: every function
runs a tool and turns its failure into a typed exception that carries the
tool's diagnostics, so a Python user sees the same messages as a shell user.
``rp.plot`` draws losses and timelines with matplotlib.
"""

from rp import plot
from rp.driver import compile, train
from rp.finetune import finetune, resume as resume_finetune
from rp.tools import ToolError, ToolNotFoundError, find_tool, opt, run_tool
from rp.trace import TraceError, trace

__all__ = ["ToolError", "ToolNotFoundError", "TraceError", "compile",
           "finetune", "find_tool", "resume_finetune", "opt", "plot", "run_tool", "trace", "train"]
__version__ = "0.1.0"
