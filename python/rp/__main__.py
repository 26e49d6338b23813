"""``python -m rp TOOL ARGS...`` runs an rp tool found the way ``rp`` finds
it, so scripts can call the tools without knowing where they were built."""

import os
import sys

from rp.tools import ToolNotFoundError, find_tool


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print("usage: python -m rp TOOL [ARGS...]   (TOOL: opt, or rp-opt)",
              file=sys.stderr)
        return 1 if len(argv) < 2 else 0
    name = argv[1] if argv[1].startswith("rp-") else "rp-" + argv[1]
    try:
        tool = find_tool(name)
    except ToolNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    os.execv(str(tool), [str(tool), *argv[2:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
