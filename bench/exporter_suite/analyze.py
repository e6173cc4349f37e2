"""analyze.py T2O.jsonl TORCH.jsonl [N]: pass counts per exporter, the cases both ran, and the N most common reasons of the cases only torch.onnx passes."""
import json, sys, collections, re
def load(p):
    d = {}
    for l in open(p):
        r = json.loads(l); d[r["id"]] = r
    return d
a = load(sys.argv[1]); b = load(sys.argv[2])
def st(r): return r["status"] if r else "missing"
for name, d in (("t2o", a), ("torch", b)):
    c = collections.Counter(r["status"] for r in d.values())
    print(name, dict(c))
common = [k for k in a if k in b]
# cases: not skipped in either and run_test called
cases = [k for k in common if a[k]["status"] != "skip" and b[k]["status"] != "skip" and (a[k]["calls"] or b[k]["calls"])]
pa = sum(a[k]["status"] == "pass" for k in cases); pb = sum(b[k]["status"] == "pass" for k in cases)
print(f"cases {len(cases)}: t2o {pa}, torch.onnx {pb}")
only_b = [k for k in cases if b[k]["status"] == "pass" and a[k]["status"] != "pass"]
only_a = [k for k in cases if a[k]["status"] == "pass" and b[k]["status"] != "pass"]
print("only torch.onnx:", len(only_b), " only t2o:", len(only_a))
def norm(m):
    m = re.sub(r"onnx_test_common\.Stage: ", "", m or "")
    m = re.sub(r"\b\d+(\.\d+)?\b", "N", m)
    return m[:150]
cl = collections.Counter((a[k].get("stage"), norm(a[k].get("msg"))) for k in only_b)
for (s, m), n in cl.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 60):
    print(n, s, m)
