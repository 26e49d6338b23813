"""Checks a staged plan for races and misplaced buffers.

Usage: plan_races.py PLAN.json   (flatc --json --strict-json of a .rpplan)

Orders the jobs as the runtime may run them: each (device, queue) in plan
order, a job after every event it waits for. Two jobs that touch one buffer,
at least one writing it, must be ordered (one happens before the other);
copies that touch disjoint bytes (microbatch rows) do not conflict. Every
buffer a job touches must be on the job's device, or the host for a copy's
host side. Prints the first problems and exits 1, or a summary.
"""
import json
import sys

ALL = 1 << 62


def main():
    plan = json.load(open(sys.argv[1]))
    jobs = plan.get("jobs", [])
    buffers = plan.get("buffers", [])
    programs = plan.get("programs", [])
    queue_of = [(j.get("device", 0), j.get("queue", "compute")) for j in jobs]
    queues = sorted(set(queue_of))
    qindex = {q: i for i, q in enumerate(queues)}
    recorder = {}
    for i, j in enumerate(jobs):
        for e in j.get("records", []):
            recorder[e] = i
    by_queue = {q: [i for i, x in enumerate(queue_of) if x == q] for q in queues}
    heads = {q: 0 for q in queues}
    clock = [None] * len(jobs)
    last = {q: [0] * len(queues) for q in queues}
    done = 0
    while done < len(jobs):
        progressed = False
        for q in queues:
            while heads[q] < len(by_queue[q]):
                i = by_queue[q][heads[q]]
                waits = jobs[i].get("waits", [])
                if any(clock[recorder[e]] is None for e in waits):
                    break
                c = list(last[q])
                for e in waits:
                    c = [max(a, b) for a, b in zip(c, clock[recorder[e]])]
                c[qindex[q]] += 1
                clock[i] = c
                last[q] = c
                heads[q] += 1
                done += 1
                progressed = True
        if not progressed:
            print("deadlock")
            return 1

    def before(a, b):
        qa = qindex[queue_of[a]]
        return clock[a][qa] <= clock[b][qa]

    accesses = {}
    problems = []
    for i, j in enumerate(jobs):
        dev = j.get("device", 0)
        touched = []
        if j.get("kind", "run") == "run":
            for call in programs[j.get("program", 0)].get("calls", []):
                touched += [(b, "r", 0, ALL) for b in call.get("inputs", [])]
                touched += [(b, "w", 0, ALL) for b in call.get("outputs", [])]
            for b, _, _, _ in touched:
                if buffers[b].get("device", -1) != dev:
                    problems.append("job %d '%s' on device %d runs over buffer %d on %d"
                                    % (i, j.get("label"), dev, b, buffers[b].get("device", -1)))
        else:
            for c in j.get("copies", []):
                n = c.get("bytes", 0)
                touched += [(c.get("src", 0), "r", c.get("src_offset", 0), n),
                            (c.get("dst", 0), "w", c.get("dst_offset", 0), n)]
                ends = {buffers[c.get("src", 0)].get("device", -1),
                        buffers[c.get("dst", 0)].get("device", -1)}
                if not ends <= {-1, dev}:
                    problems.append("copy job %d '%s' on device %d touches device %s"
                                    % (i, j.get("label"), dev, ends))
        for b, mode, offset, n in touched:
            accesses.setdefault(b, []).append((i, mode, offset, n))
    for b, acc in accesses.items():
        for x in range(len(acc)):
            for y in range(x + 1, len(acc)):
                (i, mi, oi, ni), (k, mk, ok, nk) = acc[x], acc[y]
                if i == k or (mi == "r" and mk == "r"):
                    continue
                if oi + ni <= ok or ok + nk <= oi:
                    continue  # disjoint bytes (microbatch rows)
                if not before(i, k) and not before(k, i):
                    problems.append("race on buffer %d '%s': job %d '%s' (%s) and job %d '%s' (%s)"
                                    % (b, buffers[b].get("name", ""), i, jobs[i].get("label"),
                                       mi, k, jobs[k].get("label"), mk))
    for p in problems[:10]:
        print(p)
    if problems:
        print("%d problems" % len(problems))
        return 1
    print("no races: %d jobs on %d queues, %d buffers touched"
          % (len(jobs), len(queues), len(accesses)))
    return 0


sys.exit(main())
