"""Checks that docs/pitfalls.md holds the op/min-opset table the converter prints.

usage: pitfall_docs_table.py PITFALL_OP_TABLE_EXE docs/pitfalls.md [--write]
The table sits between <!-- op-table:begin --> and <!-- op-table:end -->; --write refreshes it.
"""
import subprocess
import sys

exe, doc = sys.argv[1], sys.argv[2]
table = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
text = open(doc).read()
b, e = "<!-- op-table:begin -->\n", "<!-- op-table:end -->"
i, j = text.index(b) + len(b), text.index(e)
if "--write" in sys.argv:
    open(doc, "w").write(text[:i] + table + text[j:])
elif text[i:j] != table:
    print("docs/pitfalls.md op table is stale; refresh it with:\n  python3 tests/e2e/pitfall_docs_table.py "
          f"{exe} {doc} --write")
    sys.exit(1)
