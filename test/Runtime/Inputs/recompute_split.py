"""Checks a plan's backward jobs (rp-run --describe=json on stdin): every
backward whose activation gradient is uploaded runs as a recompute job
(L.backward.recompute, its calls all marked recompute) that waits for
no gradient upload, then, next in its queue, the rest (L.backward.rest),
which waits for the gradient upload
(docs/pipeline.md). Prints the counts, and whether the compiler's
predicted timeline starts the recompute before the gradient has landed
(the timing core lays the plan's jobs out)."""
import json
import sys

plan = json.load(sys.stdin)
jobs, programs = plan["jobs"], plan["programs"]
recorder = {}
for i, job in enumerate(jobs):
    for e in job.get("records", []):
        recorder.setdefault(e, i)


def waits_on(job, prefix):
    return [recorder[e] for e in job.get("waits", [])
            if e in recorder and jobs[recorder[e]].get("label", "")
            .startswith(prefix)]


def part(job):
    name = programs[job.get("program", 0)].get("name", "").split(" slot")[0]
    return name.rsplit(".", 1)[-1]


def recompute_only(job):
    calls = programs[job.get("program", 0)].get("calls", [])
    return part(job) == "recompute" and all(c.get("recompute")
                                            for c in calls)


split = ok = early = 0
for i, job in enumerate(jobs):
    if job.get("kind", "run") != "run" or not recompute_only(job):
        continue
    split += 1
    rest = jobs[i + 1]
    din = waits_on(rest, "DIN")
    if (not waits_on(job, "DIN") and din and rest.get("label") ==
            job.get("label") and part(rest) == "rest"):
        ok += 1
    gradient_end = max(jobs[d].get("predicted_start_ms", 0) +
                       jobs[d].get("predicted_ms", 0) for d in din) if din \
        else 0
    early += job.get("predicted_start_ms", 0) < gradient_end
print(f"split backwards {split}, gated as planned {ok}, "
      f"recompute before the gradient lands {early}")
