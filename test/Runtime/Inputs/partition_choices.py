"""rp's partitioner on RoundPipe's simulator inputs (bench/roundpipe_sim.py
builds them) for the models named on the command line: prints the stages
it chooses, so that a change meant to make the search faster (issue 16)
is seen to keep its choices."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1]) / "bench"))
import roundpipe_sim as rs  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    for name in sys.argv[2:]:
        graph, hw, measured = rs.inputs(tmp, name)
        timing, _ = rs.timing(graph, hw, measured)
        print(f"{name}: {timing['stages']} step {timing['step_ms']:.0f} ms")
