"""The partitioner's own estimate (rp-print-partition's steady step, what
rp-compile's summary prints and the partition search minimizes) against
the sim device's steady step of the exported plan, on RoundPipe's
simulator inputs (bench/roundpipe_sim.py) with a profile that turns on
every host term the timing core has: `job_us` per run job, host DRAM
shared by the copies, two GPUs per uplink below their links, pageable
copies. Per model and partition, prints both and whether they agree
within the bound given first (a fraction)."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1]) / "bench"))
import roundpipe_sim as rs  # noqa: E402

bound = float(sys.argv[2])
host = json.loads(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    for arg in sys.argv[4:]:
        name, _, stages = arg.partition("=")
        graph, hw, measured = rs.inputs(tmp, name)
        profile = json.loads(Path(hw).read_text())
        profile.update(host)
        Path(hw).write_text(json.dumps(profile))
        stages = stages or rs.roundpipe_stages(name)
        timing, _ = rs.timing(graph, hw, measured, stages)
        _, sim_step, _ = rs.simulate(tmp, graph, hw, measured,
                                     timing["stages"])
        off = sim_step / timing["step_ms"] - 1
        print(f"{name}: sim {sim_step:.1f} ms, partitioner "
              f"{timing['step_ms']:.1f} ms, within {bound:.0%}: "
              f"{abs(off) <= bound} ({off * 100:+.2f}%)")
