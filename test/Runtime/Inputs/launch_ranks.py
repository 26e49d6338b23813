"""Runs one rp-run per rank of a data-parallel job on loopback, as torchrun
would: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and a free
MASTER_PORT in each process's environment.

Usage: launch_ranks.py WORLD OUT [--kill RANK:STEP] [--port-in-use]
                       [--world-of RANK:SIZE] [--only RANKS] [--mpirun]
                       -- CMD...

Rank r's stdout goes to OUT.r.out, its stderr to OUT.r.err. Every process
is bounded (120 s, then killed: exit 3). --kill RANK:STEP kills rank RANK
(SIGKILL) once it has printed "step STEP" (--stop: stops it, SIGSTOP, as
a hung rank, and kills it once rank 0 has ended); --port-in-use holds the port
open first; --world-of RANK:SIZE starts that rank with another WORLD_SIZE;
--only "0" starts those ranks alone (the others never come). Prints
"rank R exit C" per rank; exits 0 when every rank exited 0, else 1.
--extra RANK:ARGS appends ARGS (split on spaces) to rank RANK's command
only (ranks started with different settings).
--mpirun starts the ranks with OpenMPI's mpirun instead (OMPI_COMM_WORLD_*
in their environment; as root it needs --allow-run-as-root, and
--oversubscribe lets it start more ranks than this machine has cores).
"""

import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main(argv):
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    world, out = int(opts[0]), opts[1]
    kill = worlds = only = None
    extra = {}
    hold = None
    mpirun = stop = False
    i = 2
    while i < len(opts):
        if opts[i] in ("--kill", "--stop"):
            kill = tuple(int(x) for x in opts[i + 1].split(":"))
            stop = opts[i] == "--stop"
            i += 2
        elif opts[i] == "--world-of":
            worlds = tuple(int(x) for x in opts[i + 1].split(":"))
            i += 2
        elif opts[i] == "--only":
            only = [int(x) for x in opts[i + 1].split(",")]
            i += 2
        elif opts[i] == "--extra":
            r, args = opts[i + 1].split(":", 1)
            extra[int(r)] = args.split()
            i += 2
        elif opts[i] == "--mpirun":
            mpirun = True
            i += 1
        elif opts[i] == "--port-in-use":
            hold = True
            i += 1
        else:
            sys.exit(f"launch_ranks.py: unknown option {opts[i]}")
    port = free_port()
    if hold:
        hold = socket.socket()
        hold.bind(("127.0.0.1", port))
        hold.listen(1)
    procs = {}
    if mpirun:
        procs[0] = subprocess.Popen(
            ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
             str(world), "-x", "MASTER_ADDR=127.0.0.1", "-x",
             f"MASTER_PORT={port}", "sh", "-c",
             f'exec "$@" > {out}.$OMPI_COMM_WORLD_RANK.out '
             f'2> {out}.$OMPI_COMM_WORLD_RANK.err', "sh"] + cmd,
            stdout=open(f"{out}.mpirun.log", "w"), stderr=subprocess.STDOUT)
    for r in range(0 if mpirun else world):
        if only is not None and r not in only:
            continue
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),
                   WORLD_SIZE=str(worlds[1] if worlds and worlds[0] == r
                                  else world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs[r] = subprocess.Popen(
            cmd + extra.get(r, []), env=env, stdout=open(f"{out}.{r}.out", "w"),
            stderr=open(f"{out}.{r}.err", "w"))
    deadline = time.time() + 120
    killed = False
    while any(p.poll() is None for p in procs.values()):
        if time.time() > deadline:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
            print("launch_ranks.py: a rank ran past 120 s; killed")
            sys.exit(3)
        if kill and not killed:
            text = open(f"{out}.{kill[0]}.out").read()
            if f"step {kill[1]} " in text:
                if stop:
                    procs[kill[0]].send_signal(signal.SIGSTOP)
                else:
                    procs[kill[0]].kill()
                killed = True
        if stop and killed and procs[0].poll() is not None:
            # The hung rank's peer has given up: end the hung rank too.
            procs[kill[0]].kill()
        time.sleep(0.01)
    ok = True
    for r, p in sorted(procs.items()):
        print(f"rank {r} exit {p.returncode}")
        ok &= p.returncode == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
