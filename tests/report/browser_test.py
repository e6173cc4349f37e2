"""A verify report in headless Chromium: the page's script runs without errors, the graph is drawn
(node labels in the DOM, a screenshot that is not blank and shows red nodes), the node broken on
purpose is the one marked, with its source line shown when it is opened, search by name outlines the
matching nodes, and the If and Loop bodies of a scripted model can be shown.

usage: browser_test.py TORCH2ONNX VERIFY_FIXTURES WORK_DIR
Chromium is a package scripts/setup.sh installs: without it the test fails.
"""
import os
import re
import shutil
import subprocess
import sys

import onnx
from PIL import Image


def run(args, expect=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if expect is not None and p.returncode != expect:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}")
    return p


def chromium(browser, url, *extra):
    # Root in a container has no user namespace sandbox; the page is our own file.
    args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,1400",
            "--virtual-time-budget=10000", "--enable-logging=stderr", "--v=0", *extra, url]
    return run(args)


def console_errors(stderr):
    return [l for l in stderr.splitlines() if "CONSOLE" in l and re.search(r"Uncaught|Error|error", l)]


def main():
    cli, fixtures, work = sys.argv[1:4]
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("chromium is not installed (scripts/setup.sh installs it: apt-get install chromium)")
    os.makedirs(work, exist_ok=True)
    model = os.path.join(fixtures, "cnn", "model.pt")
    good = os.path.join(work, "cnn.onnx")
    run([cli, "convert", model, "-o", good, "--input", "x:1x3x6x6", "--quiet"], expect=0)

    # Break the first Relu: the report must mark exactly that node.
    m = onnx.load(good)
    index = next(i for i, n in enumerate(m.graph.node) if n.op_type == "Relu")
    node = m.graph.node[index]
    node.op_type = "Sigmoid"
    source = node.doc_string.rsplit(" ", 1)[0]
    bad = os.path.join(work, "broken.onnx")
    onnx.save(m, bad)
    page = os.path.join(work, "broken.html")
    run([cli, "verify", model, bad, "--report", page], expect=1)

    url = "file://" + os.path.abspath(page)
    p = chromium(browser, url, "--dump-dom")
    dom = p.stdout
    failures = []
    if 'data-ready="1"' not in dom:
        failures.append("the page script did not finish (no data-ready=1)")
    if "data-js-errors" in dom:
        failures.append("script errors: " + re.search(r'data-js-errors="([^"]*)"', dom).group(1))
    failures += ["console: " + l for l in console_errors(p.stderr)]
    if 'class="graph-svg"' not in dom:
        failures.append("no graph SVG in the DOM")
    for label in (">Conv</text>", ">Sigmoid</text>"):
        if label not in dom:
            failures.append(f"node label {label} not in the DOM")
    marked = re.findall(r'<g id="g0n(\d+)" class="node op differs diverging">', dom)
    if marked != [str(index)]:
        failures.append(f"diverging node(s) {marked}, expected g0n{index} ({node.name})")

    # Opening the node (as a click does) shows where it came from.
    p = chromium(browser, f"{url}#node=g0n{index}", "--dump-dom")
    details = re.search(r'<aside id="details">(.*?)</aside>', p.stdout, re.S)
    text = details.group(1) if details else ""
    if "first diverging node" not in text or source not in text or node.name not in text:
        failures.append(f"details of the diverging node lack its name/source {node.name!r} {source!r}: {text[:300]!r}")
    failures += ["console: " + l for l in console_errors(p.stderr)]

    # Searching by name outlines every matching node, in every graph.
    want = sum(1 for n in m.graph.node if "conv" in n.name.lower())
    p = chromium(browser, f"{url}#search=conv", "--dump-dom")
    hits = re.findall(r'<g id="g\d+n\d+" class="[^"]*\bhit\b', p.stdout)
    count = re.search(r'<span id="search-count">([^<]*)</span>', p.stdout)
    if want == 0 or len(hits) != want or not count or count.group(1) != f"{want} matches":
        failures.append(f"search 'conv': {len(hits)} nodes outlined, count {count and count.group(1)!r}, expected {want}")

    # If and Loop bodies are drawn and can be shown (as the graph list or the node's button does).
    cf_pt = os.path.join(work, "control_flow.pt")
    run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "control_flow_model.py"), cf_pt],
        expect=0)
    cf_page = os.path.join(work, "control_flow.html")
    run([cli, "convert", cf_pt, "-o", os.path.join(work, "control_flow.onnx"), "--input", "x:3x4", "--dynamic", "x:0=n", "--quiet",
         "--report", cf_page], expect=0)
    with open(cf_page) as f:
        bodies = re.findall(r'<option value="(g\d+)">(If|Loop) ', f.read())
    if sorted(kind for _, kind in bodies) != ["If", "If", "Loop"]:
        failures.append(f"expected two If bodies and a Loop body in the graph list, got {bodies}")
    for gid, kind in bodies:
        p = chromium(browser, "file://" + os.path.abspath(cf_page) + f"#graph={gid}", "--dump-dom")
        shown = re.search(r'<div class="graph-view shown" data-graph="(g\d+)"', p.stdout)
        drawn = re.findall(rf'<g id="{gid}n\d+" class="node', p.stdout)
        if not shown or shown.group(1) != gid or not drawn:
            failures.append(f"{kind} body {gid}: shown {shown and shown.group(1)}, {len(drawn)} nodes drawn")
        failures += ["console: " + l for l in console_errors(p.stderr)]

    # Headless screenshots show the top of the document (a scrolled page is not repainted there),
    # so the window is tall enough for the top of the graph, where the broken Relu sits.
    shot = os.path.join(work, "broken.png")
    chromium(browser, url, f"--screenshot={shot}", "--window-size=1280,2000")
    img = Image.open(shot).convert("RGB")
    pixels = list(img.getdata())
    width = img.size[0]

    def is_red(p):  # the fill of "differs" nodes (and of the legend's swatch)
        return abs(p[0] - 0xef) < 12 and abs(p[1] - 0x9a) < 12 and abs(p[2] - 0x9a) < 12

    non_white = sum(1 for r, g, b in pixels if r + g + b < 720)
    red_rows = [y for y in range(img.size[1]) if sum(is_red(p) for p in pixels[y * width:(y + 1) * width]) >= 5]
    bands = sum(1 for i, y in enumerate(red_rows) if i == 0 or y != red_rows[i - 1] + 1)
    print(f"screenshot {img.size[0]}x{img.size[1]}: {non_white} non-white pixels, red in {len(red_rows)} rows "
          f"({bands} bands); page {os.path.getsize(page)} bytes")
    if non_white < 0.01 * len(pixels):
        failures.append("the screenshot is blank")
    # The legend's swatch is one band of red rows; each drawn node that differs adds one.
    if bands < 2:
        failures.append("no red node on the screenshot besides the legend")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
