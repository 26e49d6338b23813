"""Runs the ```python block of README.md's "## Python" section as written,
in the current folder. Usage: readme_snippet.py README.md"""

import re
import sys

text = open(sys.argv[1]).read()
section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
if len(blocks) != 1:
    sys.exit(f"readme_snippet.py: expected one python block in README's "
             f"Python section, found {len(blocks)}")
exec(compile(blocks[0], "README.md (Python section)", "exec"), {"__name__": "__main__"})
