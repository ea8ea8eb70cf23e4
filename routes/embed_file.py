#!/usr/bin/env python3
"""embed_file.py OUT.c SYMBOL FILE [--json-compact]: writes a C file defining `const char
SYMBOL[]` (the file's bytes, NUL-terminated) and `const size_t SYMBOL_len`, so the binary serves
it from any directory. --json-compact embeds a JSON file without white space (every JSON answer
goes out compact, and a compact body costs the server one scan instead of a copy)."""
import json
import sys

out, sym, path = sys.argv[1:4]
data = open(path, "rb").read()
if "--json-compact" in sys.argv[4:]:
    data = json.dumps(json.loads(data), ensure_ascii=False, separators=(",", ":")).encode()
with open(out, "w") as f:
    f.write("#include <stddef.h>\nconst char %s[] = {\n" % sym)
    for i in range(0, len(data), 20):
        f.write(",".join(str(b) for b in data[i:i + 20]) + ",\n")
    f.write("0};\nconst size_t %s_len = %d;\n" % (sym, len(data)))
