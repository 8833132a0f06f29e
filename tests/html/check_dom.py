"""check_dom.py DOM.html JSON [--pipeline|--generic|--check] [--ops N]: asserts on the DOM that
headless Chromium built from pprof-report --html's page (--pipeline, --generic: JSON is the
summary), pprof-check --html's (--check: JSON is its --json report) or pprof-check --history
--html's (--history: every value drawn, every change point marked), for tests/html/html_test.sh:
the sections are there, every value marked data-key equals the JSON's field of that name (numbers
as printed, to the page's precision; texts exactly), the Gantt holds one bar per kept op. Exit 0,
or 1 with the reasons."""
import json
import re
import sys
from html.parser import HTMLParser


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.keys, self.ops, self.stack = set(), {}, 0, []
        self.points, self.cps = 0, 0
        self.key = None
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "rect" and a.get("class") == "op":
            self.ops += 1
        if tag == "circle" and a.get("class") == "point":
            self.points += 1
        if tag == "line" and a.get("class") == "cp":
            self.cps += 1
        if "data-key" in a:
            self.key, self.text = a["data-key"], []

    def handle_data(self, data):
        if self.key is not None:
            self.text.append(data)

    def handle_endtag(self, tag):
        if self.key is not None and tag in ("td", "span", "p"):
            self.keys[self.key] = "".join(self.text).strip()
            self.key = None


def path(root, key):
    node = root
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def field(summary, key):
    """The summary's value at a dotted key ("step_ms.median", "stages.0.busy_ms")."""
    aliases = {"files": lambda s: len(s["run"]["files"]), "events": lambda s: s["run"]["events"],
               "dropped": lambda s: s["run"]["dropped"],
               "stages": lambda s: s["pipeline"]["stages"],
               "microbatches": lambda s: s["pipeline"]["microbatches"],
               "steps": lambda s: s["analysis"]["steps"]}
    if key in aliases:
        return aliases[key](summary)
    node = summary if key.startswith(("stages.", "memory.")) else summary["aggregates"]
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def main():
    dom_path, summary_path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    want_ops = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--ops" else None
    d = Dom()
    d.feed(open(dom_path, encoding="utf-8").read())
    s = json.load(open(summary_path, encoding="utf-8"))
    bad = []
    if mode == "--history":
        need = {"result", "change-points", "charts"}
        values = sum(1 for m in s["metrics"] for v in m["values"] if v is not None)
        cps = sum(len(m["change_points"]) for m in s["metrics"])
        if d.points != values:
            bad.append("history: %d points drawn, %d values" % (d.points, values))
        if d.cps != cps:
            bad.append("history: %d change points drawn, %d found" % (d.cps, cps))
    elif mode == "--check":
        need = {"result", "sides", "metrics", "notes"}
    else:
        need = {"run", "warnings"} | ({"summary", "stages", "gantt", "gantt-svg", "bubble-bars"}
                                      if mode == "--pipeline" else {"no-pipeline", "ranges"})
    for i in sorted(need - d.ids):
        bad.append("section #%s missing" % i)
    if mode == "--pipeline" and len(d.keys) < 10:
        bad.append("only %d numbers marked" % len(d.keys))
    for key, shown in sorted(d.keys.items()):
        try:
            v = path(s, key) if mode in ("--check", "--history") else field(s, key)
        except (KeyError, IndexError, TypeError, ValueError):
            bad.append("%s: no such field in the JSON" % key)
            continue
        if isinstance(v, str):
            if shown != v:
                bad.append("%s: page %r, JSON %r" % (key, shown, v))
            continue
        if v is None:
            if shown not in ("\u2013", "-"):
                bad.append("%s: page %r, JSON null" % (key, shown))
            continue
        if mode == "--check":  # %g-style: four or more significant digits
            m = re.match(r"^[-+]?[0-9.]+(e[-+]?[0-9]+)?", shown)
            if not m or abs(float(m.group(0)) - v) > 6e-4 * abs(v) + 1e-12:
                bad.append("%s: page %s, JSON %r" % (key, shown, v))
            continue
        m = re.match(r"^-?[0-9]+(\.([0-9]+))?", shown)
        if not m:
            bad.append("%s: shown as %r" % (key, shown))
            continue
        digits = len(m.group(2) or "")
        scale = 100.0 if shown.endswith("%") else 1.0
        if abs(float(m.group(0)) - v * scale) > 0.51 * 10 ** -digits + 1e-12:
            bad.append("%s: page %s, summary %r" % (key, shown, v))
    if want_ops is not None and d.ops != want_ops:
        bad.append("Gantt: %d bars, %d kept ops" % (d.ops, want_ops))
    for b in bad:
        print("check_dom: " + b)
    print("check_dom: %d sections, %d numbers checked against the summary, %d Gantt bars%s"
          % (len(d.ids), len(d.keys), d.ops, "" if not bad else ": FAILED"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
