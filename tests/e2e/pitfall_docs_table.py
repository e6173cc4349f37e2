"""Checks that docs/pitfalls.md holds the op/min-opset table the converter prints.

usage: pitfall_docs_table.py PITFALL_OP_TABLE_EXE docs/pitfalls.md [--write]
The table sits between <!-- op-table:begin --> and <!-- op-table:end -->; --write refreshes it.
"""
import os
import re
import subprocess
import sys

exe, doc = sys.argv[1], sys.argv[2]
table = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
# Converters that need a newer opset only for some argument forms call b.require(N, "what").
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "torch")
forms = set()
for root, _, files in os.walk(src):
    for f in files:
        if f.endswith(".cpp"):
            for m in re.finditer(r'require\((\d+),\s*"([^"]+)"\)', open(os.path.join(root, f)).read()):
                forms.add((int(m.group(1)), m.group(2)))
if forms:
    table += "\n| minimum opset | only for this form |\n|---|---|\n"
    for opset, what in sorted(forms):
        table += f"| {opset} | {what} |\n"
text = open(doc).read()
b, e = "<!-- op-table:begin -->\n", "<!-- op-table:end -->"
i, j = text.index(b) + len(b), text.index(e)
if "--write" in sys.argv:
    open(doc, "w").write(text[:i] + table + text[j:])
elif text[i:j] != table:
    print("docs/pitfalls.md op table is stale; refresh it with:\n  python3 tests/e2e/pitfall_docs_table.py "
          f"{exe} {doc} --write")
    sys.exit(1)
