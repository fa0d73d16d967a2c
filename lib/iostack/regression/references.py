"""Performance references kept in YAML beside the checks, each number with its provenance.

ReFrame 4.10 can read references from YAML itself (`reference = {'$ref': 'file.yaml'}`),
but its format is strict: every leaf must be a reference tuple, so a number cannot carry
where it came from. These files add that, and this module turns them into the plain
`reference` dict a check sets (iostack_rfm.base) and writes what `bin/iostack
record-baseline` records (iostack.regression.baseline). File: `reframe-tests/references/<check
module>.yaml`.

    FdbThroughputCheck:                      # the check class
      thresholds:                            # what record-baseline gives new entries:
        fdb_write_ratio: {lower: -0.5, upper: null, unit: ratio}   # gated
        fdb_write_bw: {lower: null, upper: null, unit: MiB/s}      # informational
      references:
        local:default+stack:                 # system:partition+environment
          async_write=False,size=small:      # the test's parameters, or '*' for all
            fdb_write_ratio:
              value: 0.8
              lower: -0.5                    # fractions of value; null = unbounded
              upper: null
              unit: ratio
              provenance: {recorded: ..., commit: ..., spack_lock_sha256: ..., session: ...}
                                             # or e.g. {source: "[OIFS-HECToR] Table 2"}
                                             # + cpu_freq_khz where its job's sruns were capped

A measured value is keyed by the programming environment it was measured in: Debian's FDB
(`builtin`) and the release's (`stack`) are different programs, and neither is judged by
the other's numbers. A key without `+environment` (a figure from a document) holds for
every environment; a key with one overrides it for that environment.

A measured value is keyed by the node it was measured on too (`@node`,
iostack.regression.node: the node's own identity, or a node class the site declares), and an
absolute figure (MiB/s, seconds, CPU s/GiB) is judged only there. A figure whose threshold
says `transfers: true` (a ratio of two things measured in the same run, a work count) is
judged on every node: by the node's own value, else by another node's (the latest recorded).
On a node without a baseline of its own, the absolute figures get ReFrame's "no reference"
(0, unbounded): shown, not judged, and the nightly says the node needs `record-baseline`.

A partition (and environment) that no node has recorded gets an impossible reference for
every gated variable (a lower bound no value reaches), so a new system fails until someone
records its baseline with `bin/iostack record-baseline`. Standard library plus PyYAML
(which ReFrame needs).
"""
from __future__ import annotations

import copy
import functools
import hashlib
import math
import numbers
import pathlib
import re
import sys

import yaml

from iostack.core import paths

#: the committed references; a command's settings may name others (IOSTACK_RFM_REFERENCES:
#: a site keeping its baselines elsewhere; the tests)
REFERENCES_DIR = paths.REFRAME_DIR / "references"
#: the reference value of a partition without a baseline: with a lower threshold of 0 no
#: measured value reaches it (finite, so JSON reports and the results DB stay valid). The
#: one definition: reports and the nightly recognise it with is_no_baseline().
NO_BASELINE = sys.float_info.max
ANY_VARIANT = "*"
#: the documents figures come from, one `## [KEY]` section each
CITATIONS = paths.REPO / "REFERENCES.md"


def references_file(check_file, directory: pathlib.Path) -> pathlib.Path:
    """<directory>/<stem>.yaml for the check module `check_file`."""
    return directory / (pathlib.Path(check_file).stem + ".yaml")


def variant_key(params: dict) -> str:
    """A test variant's key: its parameters, `name=value` sorted by name, comma-joined."""
    if not params:
        return ANY_VARIANT
    return ",".join(f"{k}={params[k]}" for k in sorted(params))


@functools.lru_cache(maxsize=64)
def _parsed(digest: str, text: str) -> dict:
    # libyaml's loader where PyYAML has it: the pure-Python one spent 0.24 CPU s on
    # fdb_throughput.yaml, and every check instance reads its file (a dry run of OCI's 165
    # cases parsed them 424 times, half its CPU)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader) or {}


def load(path) -> dict:
    """A references file's contents (a copy: the caller may change it), {} if it is
    missing. Parsed once per content (by its sha256), however often it is read."""
    path = pathlib.Path(path)
    if not path.is_file():
        return {}
    text = path.read_text()
    return copy.deepcopy(_parsed(hashlib.sha256(text.encode()).hexdigest(), text))


def is_no_baseline(ref) -> bool:
    """Whether a reference value (as a report stores it) is the no-baseline placeholder."""
    return isinstance(ref, (int, float)) and ref >= NO_BASELINE / 2


def key(partition: str, environ: str | None = None, node: str | None = None) -> str:
    """The references file's key of a partition (`system:partition`), environment and node."""
    return (f"{partition}+{environ}" if environ else partition) + (f"@{node}" if node else "")


def split_key(key_: str) -> tuple[str, str | None]:
    """(`system:partition`, environment or None) of a references file's key (its node aside:
    node_of)."""
    partition, _, environ = key_.partition("@")[0].partition("+")
    return partition, environ or None


def node_of(key_: str) -> str | None:
    """The node of a references file's key, None for a key that holds on every node."""
    return key_.partition("@")[2] or None


def transfers(section: dict, var: str) -> bool:
    """Whether a variable is judged on every node (`transfers: true` in its threshold: a
    ratio measured in one run, a work count), not only on the node that recorded it."""
    return bool(((section.get("thresholds") or {}).get(var) or {}).get("transfers"))


def _keys_of(recorded: dict, partition: str, environ: str | None, node) -> list[str]:
    """The keys of `partition` that hold for `environ` and node `node` (None: keys without a
    node), env-less first."""
    return [k for k in recorded if split_key(k)[0] == partition
            and split_key(k)[1] in (None, environ) and node_of(k) == node
            and (split_key(k)[1] is None or environ)]


def _newest(variants: dict) -> str:
    return max((str(((e or {}).get("provenance") or {}).get("recorded", ""))
                for entries_ in (variants or {}).values() for e in (entries_ or {}).values()),
               default="")


def entries(section: dict, partition: str, variant: str, environ: str | None,
            node: str | None = None) -> dict:
    """The perf-variable entries that hold for one partition, environment, variant and node:
    lowest first, other nodes' figures that transfer (the latest recorded node last), then
    every figure of keys without a node, then the node's own; within each, the keys of any
    environment before the environment's own, '*' before the variant's own."""
    recorded = section.get("references") or {}
    others = sorted({node_of(k) for k in recorded if node_of(k) and node_of(k) != node},
                    key=lambda n: (max((_newest(recorded[k]) for k in recorded
                                        if node_of(k) == n), default=""), n))
    layers = [(n, True) for n in others] + [(None, False)] + ([(node, False)] if node else [])
    merged: dict = {}
    for layer_node, only_transfers in layers:
        keys = sorted(_keys_of(recorded, partition, environ, layer_node),
                      key=lambda k: split_key(k)[1] is not None)
        for k in keys:
            by_variant = recorded.get(k) or {}
            for found in (by_variant.get(ANY_VARIANT) or {},
                          by_variant.get(variant) or {} if variant != ANY_VARIANT else {}):
                merged.update({var: e for var, e in found.items()
                               if not only_transfers or transfers(section, var)})
    return merged


def recorded_anywhere(section: dict, partition: str, environ: str | None) -> bool:
    """Whether some node (or a document) has values for the partition and environment."""
    return any(split_key(k)[0] == partition and split_key(k)[1] in (None, environ)
               for k in section.get("references") or {})


def recorded_since(entry: dict | None) -> float:
    """Unix time of the first night an entry was recorded from (0 if unknown): the nightly's
    history test starts there, so recording a new baseline accepts a change."""
    import datetime

    prov = (entry or {}).get("provenance") or {}
    when = prov.get("since") or prov.get("recorded")
    try:
        return datetime.datetime.strptime(str(when), "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return 0.0


def has_baseline(section: dict, partition: str, variant: str, environ: str | None,
                 node: str | None = None) -> bool:
    """Whether every gated variable has a value of the node's own (or of a key that holds on
    every node): other nodes' figures that transfer are no baseline of this one."""
    gated = gated_variables(section)
    recorded = section.get("references") or {}
    own = {k: v for k, v in recorded.items() if node_of(k) in (None, node)}
    found = entries({**section, "references": own}, partition, variant, environ, node)
    return bool(found) and all(v in found for v in gated)


def gated_variables(section: dict) -> list[str]:
    """Variables with a lower or upper threshold: the ones a run can fail on."""
    return [name for name, t in (section.get("thresholds") or {}).items()
            if t.get("lower") is not None or t.get("upper") is not None]


def reference_dict(section: dict, variant: str, environ: str | None,
                   node: str | None = None) -> dict:
    """The `reference` a check sets in `environ` on `node`: the partitions recorded for it
    (ReFrame keys a reference by `system:partition` only), and '*' that no value meets. A
    gated figure that holds only on the node that recorded it, judged on another node, gets
    ReFrame's own "no reference" (0, unbounded): reported, not judged; a '*' it would fall
    back to would fail it."""
    ref = {}
    thresholds = section.get("thresholds") or {}
    partitions = {split_key(k)[0] for k in (section.get("references") or {})}
    for partition in sorted(partitions):
        if not recorded_anywhere(section, partition, environ):
            continue
        found = entries(section, partition, variant, environ, node)
        ref[partition] = {var: (e["value"], e.get("lower"), e.get("upper"), e.get("unit"))
                          for var, e in found.items()}
        for var in gated_variables(section):
            ref[partition].setdefault(var, (0, None, None, thresholds[var].get("unit")))
    ref["*"] = {var: (NO_BASELINE, 0, None, thresholds[var].get("unit"))
                for var in gated_variables(section)}
    return ref


def record(section: dict, partition_key: str, variant: str, var: str, value: float,
           unit: str | None, provenance: dict, lower=None, upper=None,
           spread: dict | None = None) -> dict:
    """Set one entry under `partition_key` (key(): partition and environment), creating
    levels as needed; thresholds default to the section's; `spread`: the measured spread
    its band was made from (iostack.regression.gates.Band)."""
    t = (section.get("thresholds") or {}).get(var) or {}
    entry = {
        "value": value,
        "lower": t.get("lower") if lower is None else lower,
        "upper": t.get("upper") if upper is None else upper,
        "unit": unit if unit is not None else t.get("unit"),
        **({"spread": spread} if spread is not None else {}),
        "provenance": provenance,
    }
    section.setdefault("references", {}).setdefault(partition_key, {}).setdefault(
        variant, {})[var] = entry
    return entry


def citation_keys() -> set[str]:
    """The citation keys REFERENCES.md defines."""
    return set(re.findall(r"^## \[([^\]]+)\]", CITATIONS.read_text(), re.MULTILINE))


def _citation_problem(where: str, provenance, keys: set[str]) -> list[str]:
    """A figure from a document must name it by a key of REFERENCES.md."""
    if not isinstance(provenance, dict) or "source" not in provenance:
        return []
    m = re.match(r"\[([^\]]+)\]", str(provenance["source"]))
    if m and m.group(1) in keys:
        return []
    return [f"{where}: source {provenance['source']!r} cites no key of {CITATIONS.name}"]


#: units of correctness figures (bytes, counts, iterations, checksums): a check asserts
#: them in its sanity function, exactly; a performance band on one would let a wrong
#: count pass within it, or record a wrong one as the reference
CORRECTNESS_UNITS = frozenset({"B", "bytes", "iterations", "messages", "fields", "files",
                               "records", "count", "checksum"})


def validate(data: dict) -> list[str]:
    """Problems in a references file's data ([] when it is sound)."""
    errors = []
    keys = citation_keys()
    for check, section in data.items():
        if not isinstance(section, dict):
            errors.append(f"{check}: not a mapping")
            continue
        for e in section.get("expectations") or []:
            errors += _citation_problem(f"{check}: expectation {e.get('what')!r}",
                                        e.get("provenance"), keys)
        for var, t in (section.get("thresholds") or {}).items():
            if "unit" not in t:
                errors.append(f"{check}: thresholds.{var}: no unit")
            gated = t.get("lower") is not None or t.get("upper") is not None
            if gated and t.get("unit") in CORRECTNESS_UNITS:
                errors.append(f"{check}: thresholds.{var}: {t['unit']} is a correctness "
                              "figure: assert it in the check's sanity function, never as "
                              "a performance reference")
        for partition, variants in (section.get("references") or {}).items():
            if not re.fullmatch(r"[^:+@\s]+:[^:+@\s]+(\+[^:+@\s]+)?(@[A-Za-z0-9._-]+)?",
                                str(partition)):
                errors.append(f"{check}: {partition}: key must be system:partition, "
                              "optionally +environment and @node")
            for variant, entries_ in (variants or {}).items():
                for var, e in (entries_ or {}).items():
                    where = f"{check}: {partition} {variant} {var}"
                    if (isinstance(e.get("provenance"), dict) and "session" in e["provenance"]
                            and split_key(str(partition))[1] is None):
                        errors.append(f"{where}: measured in a session, so its key must name "
                                      "the environment it ran in (system:partition+environment)")
                    if (isinstance(e.get("provenance"), dict) and "session" in e["provenance"]
                            and node_of(str(partition)) is None):
                        errors.append(f"{where}: measured in a session, so its key must name "
                                      "the node it ran on (system:partition+environment@node)")
                    value = e.get("value")
                    if not isinstance(value, numbers.Real) or not math.isfinite(value):
                        errors.append(f"{where}: value {value!r} is not a finite number")
                    lower, upper = e.get("lower"), e.get("upper")
                    if lower is not None and not -1 <= lower <= 0 and value and value > 0:
                        errors.append(f"{where}: lower {lower} not in [-1, 0]")
                    if upper is not None and upper < 0:
                        errors.append(f"{where}: upper {upper} is negative")
                    if not e.get("provenance"):
                        errors.append(f"{where}: no provenance")
                    freq = (e.get("provenance") or {}).get("cpu_freq_khz")
                    if freq is not None and not (isinstance(freq, int) and freq > 0):
                        errors.append(f"{where}: cpu_freq_khz {freq!r} is not a frequency in kHz")
                    errors += _citation_problem(where, e.get("provenance"), keys)
    return errors


class _Dumper(yaml.SafeDumper):
    """Every entry spelled out: no `&id001` anchors for provenance shared by entries."""

    def ignore_aliases(self, data):
        return True


def dump(path, data: dict) -> None:
    """Write `data`, keeping the file's leading comment block (comments further down are
    not kept: put explanations in the header or in `provenance`)."""
    path = pathlib.Path(path)
    header = []
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                header.append(line)
            else:
                break
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header).rstrip("\n") + ("\n" if header else "") + body)
