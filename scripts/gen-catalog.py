#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerates policies/catalog.yaml from two inputs, merged in this order:

1. tests/fixtures/ec2-catalog.yaml, the project's shared EC2 catalog. It is a recorded copy and is
   never edited; it is copied line for line, so its comments (sources, price date, field notes) and
   per-type notes survive.
2. scripts/catalog-additions.yaml, in the same schema: types the fixture lacks, appended after the
   fixture's types, and overrides of fixture entries. An additions entry whose `name` the fixture
   already has is an override: each key it gives replaces the fixture's key (a multi-line key such
   as `accelerator` is replaced whole), except `notes`, which are appended to the fixture's. The
   merged entry's notes then say which keys the additions changed and what the fixture had.

The script adds the accelfit header (apiVersion, kind, region) and an explicit `class:` after each
`family:` line. It needs nothing beyond the Python standard library: both inputs are read as text in
the fixture's layout (`  - name:` starts an entry, `    key:` starts one of its keys, `notes` is a
one-line flow list of double-quoted strings).

usage: scripts/gen-catalog.py tests/fixtures/ec2-catalog.yaml [scripts/catalog-additions.yaml] \\
           > policies/catalog.yaml
(the additions file defaults to catalog-additions.yaml next to this script)
"""
import json
import os
import re
import sys

CLASSES = {
    "T4": "nvidia-t4", "A10G": "nvidia-a10g", "L4": "nvidia-l4", "L40S": "nvidia-l40s",
    "V100": "nvidia-v100", "A100": "nvidia-a100", "H100": "nvidia-h100", "H200": "nvidia-h200",
    "B200": "nvidia-b200",
    "Trainium": "trainium1", "Trainium2": "trainium2",
    "Inferentia": "inferentia1", "Inferentia2": "inferentia2",
}
ADDITIONS_NAME = "scripts/catalog-additions.yaml"
# Keys a new type must give (the loader's required keys, plus family for the class line).
REQUIRED = ("family", "vcpus", "memory_gib")

ENTRY_RE = re.compile(r"^  - name: (\S+)$")
KEY_RE = re.compile(r"^    ([a-z_]+):(?: (.*))?$")


def die(path, msg):
    sys.stderr.write("gen-catalog: %s: %s\n" % (path, msg))
    sys.exit(1)


def parse(path):
    """Splits a catalog into (header lines before `instances:`, [entry]); an entry is
    {"name", "keys": [(key, [lines])], "tail": [comment/blank lines after its keys]}."""
    lines = open(path).read().splitlines()
    try:
        start = lines.index("instances:")
    except ValueError:
        die(path, "no 'instances:' line")
    entries = []
    for n, line in enumerate(lines[start + 1:], start + 2):
        m = ENTRY_RE.match(line)
        if m:
            entries.append({"name": m.group(1), "keys": [], "tail": [], "line": n})
            continue
        if not entries:
            if line.strip() and not line.lstrip().startswith("#"):
                die(path, "line %d: expected '  - name: <type>'" % n)
            continue
        e = entries[-1]
        k = KEY_RE.match(line)
        if k:
            if e["tail"]:
                die(path, "line %d: key after a comment inside '%s'" % (n, e["name"]))
            if any(key == k.group(1) for key, _ in e["keys"]):
                die(path, "line %d: '%s' given twice for '%s'" % (n, k.group(1), e["name"]))
            e["keys"].append((k.group(1), [line]))
        elif line.startswith("      ") and e["keys"]:
            e["keys"][-1][1].append(line)     # continuation of a mapping key
        elif not line.strip() or line.lstrip().startswith("#"):
            e["tail"].append(line)
        else:
            die(path, "line %d: unexpected line in '%s': %r" % (n, e["name"], line))
    seen = set()
    for e in entries:
        if e["name"] in seen:
            die(path, "line %d: duplicate type '%s'" % (e["line"], e["name"]))
        seen.add(e["name"])
    return lines[:start], entries


def get(entry, key):
    for k, v in entry["keys"]:
        if k == key:
            return v
    return None


def notes_of(path, entry):
    v = get(entry, "notes")
    if v is None:
        return []
    text = v[0].split(":", 1)[1].strip()
    try:
        notes = json.loads(text) if len(v) == 1 else None
    except ValueError:
        notes = None
    if not isinstance(notes, list) or not all(isinstance(s, str) for s in notes):
        die(path, "'%s': notes must be one line: a flow list of double-quoted strings" % entry["name"])
    return notes


def set_notes(entry, notes):
    line = "    notes: " + json.dumps(notes, ensure_ascii=False)
    for i, (k, _) in enumerate(entry["keys"]):
        if k == "notes":
            entry["keys"][i] = ("notes", [line])
            return
    # Absent: the fixture puts notes just before facts_source.
    at = next((i for i, (k, _) in enumerate(entry["keys"]) if k == "facts_source"),
              len(entry["keys"]))
    entry["keys"].insert(at, ("notes", [line]))


def shown(lines):
    """A key's value as the override note quotes it."""
    if len(lines) > 1:
        return "a mapping"
    value = lines[0].split(":", 1)[1].strip()
    return value if value else "empty"


def override(fx_path, add_path, base, add):
    """Applies additions entry `add` to fixture entry `base` in place."""
    said = []
    for key, lines in add["keys"]:
        if key == "notes":
            continue
        old = get(base, key)
        if old is None:
            base["keys"].append((key, lines))
            said.append("%s overrides %s (fixture: no such key)" % (ADDITIONS_NAME, key))
        else:
            i = [k for k, _ in base["keys"]].index(key)
            base["keys"][i] = (key, lines)
            said.append("%s overrides %s (fixture: %s)" % (ADDITIONS_NAME, key, shown(old)))
    extra = notes_of(add_path, add)
    if extra:
        said.append("%s adds the notes that follow" % ADDITIONS_NAME)
    if not said:
        die(add_path, "override of '%s' changes nothing" % add["name"])
    set_notes(base, notes_of(fx_path, base) + said + extra)


def class_of(path, entry):
    acc = get(entry, "accelerator")
    if acc is None or shown(acc) == "null":
        return "cpu"
    for line in acc[1:]:
        m = re.match(r"^      name: (\S+)$", line)
        if m:
            if m.group(1) not in CLASSES:
                die(path, "'%s': no class for accelerator '%s' (known: %s)"
                    % (entry["name"], m.group(1), ", ".join(sorted(CLASSES))))
            return CLASSES[m.group(1)]
    die(path, "'%s': accelerator has no name" % entry["name"])


def emit(path, entry, out):
    out.append("  - name: " + entry["name"])
    cls = class_of(path, entry)
    for key, lines in entry["keys"]:
        out.extend(lines)
        if key == "family":
            out.append("    class: " + cls)
    out.extend(entry["tail"])


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write(__doc__)
        sys.exit(2)
    fx_path = sys.argv[1]
    add_path = (sys.argv[2] if len(sys.argv) == 3 else
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog-additions.yaml"))
    fx_header, fixture = parse(fx_path)
    add_header, additions = parse(add_path)

    by_name = {e["name"]: e for e in fixture}
    added = []
    for e in additions:
        if e["name"] in by_name:
            override(fx_path, add_path, by_name[e["name"]], e)
            continue
        missing = [k for k in REQUIRED if get(e, k) is None]
        if missing:
            die(add_path, "line %d: new type '%s' has no %s"
                % (e["line"], e["name"], ", ".join(missing)))
        notes_of(add_path, e)           # validates the notes line
        added.append(e)

    out = [
        "# accelfit instance catalog: the hardware facts and prices the selection core sizes and",
        "# prices tiers with. Generated by scripts/gen-catalog.py from two inputs, merged in order:",
        "#   1. tests/fixtures/ec2-catalog.yaml, the project's shared EC2 catalog (a recorded copy,",
        "#      never edited): copied line for line, so its source notes and per-type notes stay",
        "#      verbatim;",
        "#   2. scripts/catalog-additions.yaml: the types the fixture lacks, appended after the",
        "#      fixture's types, and overrides of fixture entries (a key given there replaces the",
        "#      fixture's and `notes` are appended; such an entry's notes name each key changed and",
        "#      what the fixture had).",
        "# The two files' source notes follow, in that order. accelfit adds `class:` (the canonical",
        "# hardware class) to each type. See docs/policy.md for every key.",
        "#",
        "# ===== from tests/fixtures/ec2-catalog.yaml " + "=" * 40,
    ]
    out += fx_header
    out += ["#", "# ===== from scripts/catalog-additions.yaml " + "=" * 40]
    out += add_header
    out += ["apiVersion: accelfit.io/v1", "kind: Catalog", "region: us-east-1", "instances:"]
    for e in fixture:
        emit(fx_path, e, out)
    if added:
        out.append("  # ===== types added by scripts/catalog-additions.yaml =====")
        for e in added:
            emit(add_path, e, out)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
