"""The continuous schedule timed twice: the compiler's steady-state step
(rp-print-partition's step_ms, what rp-compile predicts) and the sim
device's steady step of the exported plan (rp-run --backend sim, async,
steps back to back), on RoundPipe's simulator inputs for the models named
on the command line (bench/roundpipe_sim.py builds them), with RoundPipe's
partition or, for NAME=STAGES, the stages given (NAME=STAGES/2: with the
fused tail as two stage jobs taking alternate microbatches). Prints, per
model, whether the two agree within 1 % and whether the sim's steady step
and bubble are below RoundPipe's (its async column); for two tail jobs,
whether the sim's step is at least 5 % below RoundPipe's."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(sys.argv[1]) / "bench"))
import roundpipe_sim as rs  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    for arg in sys.argv[2:]:
        name, _, stages = arg.partition("=")
        stages, _, jobs = stages.partition("/")
        tail_jobs = int(jobs or 1)
        graph, hw, measured = rs.inputs(tmp, name)
        stages = stages or rs.roundpipe_stages(name)
        timing, _ = rs.timing(graph, hw, measured, stages, tail_jobs)
        _, sim_step, sim_bubble = rs.simulate(tmp, graph, hw, measured,
                                              timing["stages"],
                                              tail_jobs=tail_jobs)
        span, bubble, sync = rs.MODELS[name][8:11]
        roundpipe_steady = span * (1 - sync / 100) / (1 - bubble / 100)
        off = sim_step / timing["step_ms"] - 1
        print(f"{name}: sim {sim_step:.0f} ms, compiler {timing['step_ms']:.0f}"
              f" ms, within 1%: {abs(off) <= 0.01}")
        print(f"{name}: below RoundPipe's steady step "
              f"({roundpipe_steady:.0f} ms): {sim_step < roundpipe_steady}; "
              f"bubble below its async bubble ({bubble}%): "
              f"{sim_bubble < bubble}")
        if tail_jobs == 2:
            print(f"{name}: tail as 2 jobs, at least 5% below RoundPipe's "
                  f"steady step: {sim_step <= 0.95 * roundpipe_steady}")
