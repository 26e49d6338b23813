"""Writes a .cu file of the cuda device as host C++ for CudaEmu.h.

Every launch `kernel<<<grid, block, shared, stream>>>(args)` becomes
`emuLaunch(grid, block, shared, stream, [&] { kernel(args); })`, which runs
the kernel's threads on the CPU. Usage: emulate.py IN.cu OUT.inc
"""
import sys


def emulate(src):
    out, i = [], 0
    while True:
        j = src.find("<<<", i)
        if j < 0:
            out.append(src[i:])
            return "".join(out)
        # The kernel's name (with template arguments) ends before `<<<`.
        end = j
        while src[end - 1].isspace():
            end -= 1
        start, depth = end, 0
        while start > 0:
            ch = src[start - 1]
            if ch == ">":
                depth += 1
            elif ch == "<":
                depth -= 1
            elif depth == 0 and not (ch.isalnum() or ch in "_:"):
                break
            start -= 1
        close = src.index(">>>", j)
        open_paren = close + 3
        if src[open_paren] != "(":
            raise SystemExit("emulate.py: no arguments after a launch")
        depth, k = 0, open_paren
        while True:
            if src[k] == "(":
                depth += 1
            elif src[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        out.append(src[i:start])
        out.append("emuLaunch(%s, [&] { %s(%s); })" %
                   (src[j + 3:close], src[start:end], src[open_paren + 1:k]))
        i = k + 1


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        text = emulate(f.read())
    with open(sys.argv[2], "w") as f:
        f.write(text)
