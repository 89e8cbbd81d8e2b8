#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerates policies/catalog.yaml from four inputs, merged in this order:

1. tests/fixtures/ec2-catalog.yaml, the project's shared EC2 catalog. It is a recorded copy and is
   never edited; it is copied line for line, so its comments (sources, price date, field notes) and
   per-type notes (device memory, Neuron details, spot notes) survive.
2. scripts/catalog-additions.yaml, in the same schema: types the fixture lacks, appended after the
   fixture's types, and overrides of fixture entries. An additions entry whose `name` the fixture
   already has is an override: each key it gives replaces the fixture's key (a multi-line key such
   as `accelerator` is replaced whole), except `notes`, which are appended to the fixture's. The
   merged entry's notes then say which keys the additions changed and what the fixture had.
3. tests/fixtures/ec2-instance-types.yaml, the hardware facts of every EC2 type Karpenter documents:
   every type 1 and 2 lack becomes one catalog entry on one line (a flow mapping), classified from
   its GPU or accelerator (`cpu` when it has none; `unclassified`, with a note saying why, for an
   accelerator accelfit has no class for and for a fraction of a GPU). The types 1 and 2 give get
   its `arch:`, and must agree with it on vCPUs, memory and accelerator count.
4. tests/fixtures/ec2-prices.yaml, us-east-1 on-demand prices: the price of each type of 3 (null
   when the table has none). The types 1 and 2 give must carry the table's price.
Any disagreement stops the script with the type and both values: nothing is merged silently.

The script adds the accelfit header (apiVersion, kind, region) and an explicit `class:` after each
`family:` line. It needs nothing beyond the Python standard library: inputs 1 and 2 are read as
text in the fixture's layout (`  - name:` starts an entry, `    key:` starts one of its keys, `notes`
is a one-line flow list of double-quoted strings); 3 has one `  <type>: {...}` flow mapping a line
and 4 one `    <type>: <price>` a line under its region.

usage: scripts/gen-catalog.py [--types FILE] [--prices FILE] tests/fixtures/ec2-catalog.yaml \\
           [scripts/catalog-additions.yaml] > policies/catalog.yaml
(the additions file defaults to catalog-additions.yaml next to this script; --types and --prices
to tests/fixtures/ec2-instance-types.yaml and tests/fixtures/ec2-prices.yaml)
"""
import json
import os
import re
import sys
import textwrap

CLASSES = {
    "T4": "nvidia-t4", "A10G": "nvidia-a10g", "L4": "nvidia-l4", "L40S": "nvidia-l40s",
    "V100": "nvidia-v100", "A100": "nvidia-a100", "H100": "nvidia-h100", "H200": "nvidia-h200",
    "B200": "nvidia-b200",
    "Trainium": "trainium1", "Trainium2": "trainium2",
    "Inferentia": "inferentia1", "Inferentia2": "inferentia2",
}
ADDITIONS_NAME = "scripts/catalog-additions.yaml"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGION = "us-east-1"
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


# ---- the hardware facts and the price table -----------------------------------------------------

def parse_flow(text, path, n):
    """Parses one YAML flow mapping of the types file ("{a: 1, b: {c: x}}") into a dict of
    strings and dicts. Only what that file uses: plain or double-quoted scalars, nested maps."""
    pos = 0

    def skip():
        nonlocal pos
        while pos < len(text) and text[pos] == " ":
            pos += 1

    def scalar(stops):
        nonlocal pos
        skip()
        if pos < len(text) and text[pos] == '"':
            end = text.index('"', pos + 1)
            s = text[pos + 1:end]
            pos = end + 1
            return s
        start = pos
        while pos < len(text) and text[pos] not in stops:
            pos += 1
        return text[start:pos].strip()

    def mapping():
        nonlocal pos
        skip()
        if text[pos] != "{":
            die(path, "line %d: expected '{'" % n)
        pos += 1
        out = {}
        while True:
            skip()
            if text[pos] == "}":
                pos += 1
                return out
            key = scalar(":")
            pos += 1                    # the colon
            skip()
            out[key] = mapping() if text[pos] == "{" else scalar(",}")
            skip()
            if text[pos] == ",":
                pos += 1

    try:
        return mapping()
    except (IndexError, ValueError):
        die(path, "line %d: malformed flow mapping" % n)


def parse_types(path):
    """(header comment lines, {type: facts}) of the hardware-facts file."""
    header, types = [], {}
    lines = open(path).read().splitlines()
    for n, line in enumerate(lines, 1):
        if line.startswith("#"):
            if not types:
                header.append(line)
            continue
        if line == "types:" or not line.strip():
            continue
        m = re.match(r"^  (\S+): (\{.*\})$", line)
        if not m:
            die(path, "line %d: expected '  <type>: {...}'" % n)
        if m.group(1) in types:
            die(path, "line %d: duplicate type '%s'" % (n, m.group(1)))
        types[m.group(1)] = parse_flow(m.group(2), path, n)
    return header, types


def parse_prices(path, region):
    """(header comment lines, {type: price text}) of one region of the price table."""
    header, prices, cur = [], {}, None
    for n, line in enumerate(open(path).read().splitlines(), 1):
        if line.startswith("#"):
            if cur is None:
                header.append(line)
            continue
        if line == "regions:" or not line.strip():
            continue
        m = re.match(r"^  (\S+):$", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"^    (\S+): ([0-9.]+)$", line)
        if not m or cur is None:
            die(path, "line %d: expected '    <type>: <price>'" % n)
        if cur == region:
            if m.group(1) in prices:
                die(path, "line %d: duplicate type '%s'" % (n, m.group(1)))
            prices[m.group(1)] = m.group(2)
    if not prices:
        die(path, "no prices for region %s" % region)
    return header, prices


# Source GPU and accelerator names (Karpenter's instance-gpu-name / instance-accelerator-name
# label values) to (accelfit class, maker, the name the catalog gives). None: no accelfit class.
SOURCE_ACCELS = {
    "t4": ("nvidia-t4", "NVIDIA", "T4"), "t4g": ("nvidia-t4", "NVIDIA", "T4G"),
    "a10g": ("nvidia-a10g", "NVIDIA", "A10G"), "l4": ("nvidia-l4", "NVIDIA", "L4"),
    "l40s": ("nvidia-l40s", "NVIDIA", "L40S"), "v100": ("nvidia-v100", "NVIDIA", "V100"),
    "a100": ("nvidia-a100", "NVIDIA", "A100"), "h100": ("nvidia-h100", "NVIDIA", "H100"),
    "h200": ("nvidia-h200", "NVIDIA", "H200"), "b200": ("nvidia-b200", "NVIDIA", "B200"),
    "radeon-pro-v520": ("amd-gpu", "AMD", "Radeon Pro V520"),
    "inferentia": ("inferentia1", "AWS", "Inferentia"),
    "inferentia2": ("inferentia2", "AWS", "Inferentia2"),
    "trainium": ("trainium1", "AWS", "Trainium"), "trainium2": ("trainium2", "AWS", "Trainium2"),
    "b300": (None, "NVIDIA", "B300"),
    "rtx-pro-4500": (None, "NVIDIA", "RTX PRO 4500 Blackwell"),
    "rtx-pro-server-6000": (None, "NVIDIA", "RTX PRO 6000 Blackwell Server Edition"),
    "qualcomm-ai100": (None, "Qualcomm", "Cloud AI 100"),
}
KIND_OF_CLASS = {"amd-gpu": "amd", "inferentia1": "neuron", "inferentia2": "neuron",
                 "trainium1": "neuron", "trainium2": "neuron"}
UNCLASSIFIED = "unclassified"
# MiB of one whole L4 as EC2 reports it (g6.xlarge): a fractional L4 type's share is its GPU
# memory over this.
L4_MIB = 22888


def num(x):
    """A number as the catalog writes it: "64", "2.5", "1.69921875" (exact, no trailing zeros)."""
    f = float(x)
    return "%d" % f if f.is_integer() else repr(f)


def source_accel(facts):
    """("gpu"|"accelerator", block) of a types-file entry, or (None, None) for a CPU-only type."""
    for key in ("gpu", "accelerator"):
        if isinstance(facts.get(key), dict):
            return key, facts[key]
    return None, None


def class_of_facts(path, name, facts):
    """The accelfit class of a types-file entry: "cpu" without GPU or accelerator, the class of
    its accelerator, or UNCLASSIFIED (an accelerator accelfit has no class for, or a fraction
    of a GPU that the node does not advertise as nvidia.com/gpu)."""
    _, acc = source_accel(facts)
    if acc is None:
        return "cpu"
    if acc.get("name") not in SOURCE_ACCELS:
        die(path, "'%s': unknown accelerator '%s': add it to SOURCE_ACCELS" % (name, acc.get("name")))
    cls = SOURCE_ACCELS[acc["name"]][0]
    if cls is None or int(acc["count"]) == 0:
        return UNCLASSIFIED
    return cls


def compact_entry(path, name, facts, price):
    """One catalog entry, on one line, for a type only the hardware-facts file has."""
    cls = class_of_facts(path, name, facts)
    kind, acc = source_accel(facts)
    alloc = facts.get("allocatable", {})
    notes = []
    f = ["name: " + name, "family: " + facts["family"], "class: " + cls,
         "arch: " + facts["arch"], "vcpus: " + facts["vcpu"],
         "memory_gib: " + num(int(facts["memory_mib"]) / 1024)]
    if acc is not None:
        acls, maker, label = SOURCE_ACCELS[acc["name"]]
        count = int(acc["count"])
        a = []
        if kind == "gpu":
            a.append("kind: " + KIND_OF_CLASS.get(acls, "gpu"))
        elif acls:
            a.append("kind: " + KIND_OF_CLASS[acls])
        a += ["maker: " + maker, "name: " + json.dumps(label), "count: %d" % count]
        if "memory_mib" in acc:
            per = round(int(acc["memory_mib"]) / 1024, 2)
            a.append("memory_gib_per_device: " + num(per))
            if count:
                a.append("memory_gib_total: " + num(round(per * count, 2)))
        if acls and acls.startswith("trainium") or acls and acls.startswith("inferentia"):
            die(path, "'%s': a Neuron type the shared catalog lacks: add it to %s with its "
                "device memory and NeuronCores" % (name, ADDITIONS_NAME))
        f.append("accelerator: {" + ", ".join(a) + "}")
        if count == 0:
            share = int(acc["memory_mib"]) / L4_MIB if acc["name"] == "l4" else None
            notes.append("a fraction of one NVIDIA %s (%s of its memory, %s MiB): the node "
                         "advertises no nvidia.com/gpu, so accelfit gives it no class; priced, "
                         "never sized" % (label, "1/%d" % round(1 / share) if share else "part",
                                          acc["memory_mib"]))
        elif acls is None:
            notes.append("%d x %s %s: accelfit has no class for %s, so nodes of this type are "
                         "priced but no tier is sized on them" % (count, maker, label, label))
        elif acc["name"] == "t4g":
            notes.append("T4G is the T4 for Graviton (arm64 host): class nvidia-t4")
    if "network_bandwidth_mbps" in facts:
        f.append("network_gbps_baseline: " + num(int(facts["network_bandwidth_mbps"]) / 1000))
    if "vpc.amazonaws.com/efa" in alloc:
        f += ["efa_supported: true", "efa_max_interfaces: " + alloc["vpc.amazonaws.com/efa"]]
    f.append("price_on_demand_usd_hr: " + (price if price is not None else "null"))
    if notes:
        f.append("notes: " + json.dumps(notes))
    return "  - {" + ", ".join(f) + "}"


def key_value(entry, key):
    v = get(entry, key)
    return v[0].split(":", 1)[1].strip() if v else None


def check_against_sources(path, entry, facts, price):
    """Dies when a sourced entry of the shared catalog or the additions disagrees with the
    hardware-facts file or the price table: the merge keeps both, so they must agree."""
    name = entry["name"]
    if facts is not None:
        want = {"vcpus": facts["vcpu"], "memory_gib": num(int(facts["memory_mib"]) / 1024)}
        for key, val in want.items():
            have = key_value(entry, key)
            if have is None or float(have) != float(val):
                die(path, "'%s': %s %s, the hardware facts say %s" % (name, key, have, val))
        _, acc = source_accel(facts)
        lines = get(entry, "accelerator") or []
        count = next((l.split(":", 1)[1].strip() for l in lines
                      if l.strip().startswith("count:")), "0")
        if int(count) != (int(acc["count"]) if acc else 0):
            die(path, "'%s': accelerator count %s, the hardware facts say %s"
                % (name, count, acc["count"] if acc else 0))
    have = key_value(entry, "price_on_demand_usd_hr")
    have = None if have in (None, "null") else float(have)
    if have != (float(price) if price is not None else None):
        die(path, "'%s': price %s, the price table says %s" % (name, have, price))

def emit(path, entry, out, arch=None):
    out.append("  - name: " + entry["name"])
    cls = class_of(path, entry)
    for key, lines in entry["keys"]:
        out.extend(lines)
        if key == "family":
            out.append("    class: " + cls)
            if arch and get(entry, "arch") is None:
                out.append("    arch: " + arch)
    out.extend(entry["tail"])


def main():
    args = sys.argv[1:]
    opts = {"--types": os.path.join(ROOT, "tests/fixtures/ec2-instance-types.yaml"),
            "--prices": os.path.join(ROOT, "tests/fixtures/ec2-prices.yaml")}
    while len(args) >= 2 and args[0] in opts:
        opts[args[0]] = args[1]
        args = args[2:]
    if len(args) not in (1, 2):
        sys.stderr.write(__doc__)
        sys.exit(2)
    fx_path = args[0]
    add_path = (args[1] if len(args) == 2 else
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog-additions.yaml"))
    fx_header, fixture = parse(fx_path)
    add_header, additions = parse(add_path)
    types_header, types = parse_types(opts["--types"])
    prices_header, prices = parse_prices(opts["--prices"], REGION)

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
    sourced = fixture + added
    for e in sourced:
        check_against_sources(fx_path if e["name"] in by_name else add_path, e,
                              types.get(e["name"]), prices.get(e["name"]))
    known = {e["name"] for e in sourced}
    rest = sorted(n for n in types if n not in known)
    unfacted = sorted(n for n in prices if n not in types and n not in known)

    out = [
        "# accelfit instance catalog: the hardware facts and prices the selection core sizes and",
        "# prices tiers with, and prices nodes with. Generated by scripts/gen-catalog.py; do not",
        "# edit. Four inputs, merged in order:",
        "#   1. tests/fixtures/ec2-catalog.yaml, the project's shared EC2 catalog (a recorded copy,",
        "#      never edited): copied line for line, so its source notes, device memory, Neuron",
        "#      details, spot notes and per-type notes stay verbatim;",
        "#   2. scripts/catalog-additions.yaml: the types the fixture lacks, appended after the",
        "#      fixture's types, and overrides of fixture entries (a key given there replaces the",
        "#      fixture's and `notes` are appended; such an entry's notes name each key changed and",
        "#      what the fixture had);",
        "#   3. tests/fixtures/ec2-instance-types.yaml (hardware facts of every EC2 type Karpenter",
        "#      documents): every type 1 and 2 lack, one line each, after theirs; and the `arch:`",
        "#      of the types 1 and 2 have. Types 1 and 2 give must agree with it (vCPUs, memory,",
        "#      accelerator count) or the generator stops;",
        "#   4. tests/fixtures/ec2-prices.yaml (%s on-demand, Linux, shared tenancy): the" % REGION,
        "#      price of every type of 3 it lists (null when it lists none); types 1 and 2 give",
        "#      must carry the same price or the generator stops.",
        "# The inputs' source notes follow, in that order. accelfit adds `class:` (the canonical",
        "# hardware class) to each type: `cpu` for a type with no GPU or accelerator (amd64 or",
        "# arm64, see `arch:`), the GPU's or Neuron device's class, or `%s` for an" % UNCLASSIFIED,
        "# accelerator accelfit has no class for and for a fraction of a GPU (each such type says",
        "# which in its notes): those are priced, never sized. See docs/policy.md for every key.",
        "#",
        "# NOT IN THE CATALOG: types the price table lists without hardware facts in input 3",
        "#   (no vCPUs or memory to size them with):",
    ]
    out += textwrap.wrap(", ".join(unfacted) + "." if unfacted else "none.", 96,
                         initial_indent="#   ", subsequent_indent="#   ",
                         break_on_hyphens=False)
    out += [
        "#   A node of such a type has no catalog price (annotate it with accelfit.io/hourly-price).",
        "#",
        "# ===== from tests/fixtures/ec2-catalog.yaml " + "=" * 40,
    ]
    out += fx_header
    out += ["#", "# ===== from scripts/catalog-additions.yaml " + "=" * 40]
    out += add_header
    out += ["#", "# ===== from tests/fixtures/ec2-instance-types.yaml " + "=" * 32]
    out += types_header
    out += ["#", "# ===== from tests/fixtures/ec2-prices.yaml " + "=" * 40]
    out += prices_header
    # When the prices were read: the price table's header says "generated at <RFC 3339>".
    stamp = None
    for line in prices_header:
        m = re.search(r"generated at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)", line)
        if m:
            stamp = m.group(1)
    if not stamp:
        die(opts["--prices"], "the header does not say when the prices were generated "
            "(\"generated at YYYY-MM-DDTHH:MM:SSZ\")")
    out += ["apiVersion: accelfit.io/v1", "kind: Catalog", "region: " + REGION,
            "prices_as_of: " + stamp, "instances:"]
    for e in fixture:
        emit(fx_path, e, out, (types.get(e["name"]) or {}).get("arch"))
    if added:
        out.append("  # ===== types added by scripts/catalog-additions.yaml =====")
        for e in added:
            emit(add_path, e, out, (types.get(e["name"]) or {}).get("arch"))
    out.append("  # ===== every other type of tests/fixtures/ec2-instance-types.yaml =====")
    for name in rest:
        out.append(compact_entry(opts["--types"], name, types[name], prices.get(name)))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
