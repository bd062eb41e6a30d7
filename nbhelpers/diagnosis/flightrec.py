"""Flight Recorder dumps a job wrote, one file per rank: the first collective the ranks disagree on.

What torch 2.13 records (checked on real 2-rank gloo jobs, CPU build):

* Every process group (gloo and nccl) appends one entry per collective to a per-process ring buffer:
  ``collective_seq_id`` (per group, from 1), ``profiling_name`` (``gloo:all_reduce``), ``input_sizes``,
  ``output_sizes``, ``input_dtypes`` (``Float``), ``state``, ``process_group`` = (name, desc) and the Python
  ``frames`` of the call.  It is on by default (2000 entries); ``TORCH_FR_BUFFER_SIZE=N`` resizes it,
  ``0`` turns it off.  The entry is written when the collective is *issued*, so a rank stuck inside
  collective #7 has #7 as its last entry, and a rank that never got there does not have it.
* gloo entries stay ``state: scheduled`` for ever (no start/finish events) and ``pg_status`` says the hung
  collective "completed": for gloo only *presence*, op, sizes and dtypes can be compared, not progress.
* gloo's ``pg_config`` is broken in 2.13: every group is filed under the name ``''`` (the last one created
  wins, its ranks may be ``'[]'``), while entries name the group ``'0'``/``'default_pg'``.  torch's own
  analyser (``python -m torch.distributed.flight_recorder.fr_trace``, and the debug server's FR page) stops
  with ``KeyError: ('0', 0)`` on gloo dumps.  :func:`analyse` rebuilds the group table from the entries
  (the default group spans the whole world) and then runs torch's matcher (``build_collectives``) on it.

How a job gets the dumps out:

* **nccl**: automatic.  When a collective times out the watchdog writes ``$TORCH_FR_DUMP_TEMP_FILE<rank>``
  (default ``/tmp/nccl_trace_rank_<rank>``, a pickle) on every rank (``TORCH_NCCL_DUMP_ON_TIMEOUT``, on by
  default).  Copy those files into one folder.
* **gloo**: nothing is written by torch (``TORCH_FR_DUMP_TEMP_FILE`` is read only by ProcessGroupNCCL).  The
  job must write ``torch._C._distributed_c10d._dump_fr_trace()`` (pickle bytes; ``_dump_fr_trace_json()``
  for JSON without stack frames) to ``<prefix><rank>`` itself: in an ``except`` around the training loop
  (the gloo timeout raises ``RuntimeError``) and in a SIGTERM handler (torchrun sends SIGTERM to the
  other ranks once one has failed).  ``nbhelpers.workers.frdump`` does exactly that.  A live alternative:
  ``torch.distributed.debug.start_debug_server()`` (needs jinja2, tabulate, aiohttp or requests) serves
  each rank's buffer as JSON at ``/handler/fr_trace_json``, even while the rank is blocked in a collective.
* A gloo size mismatch small enough for one message makes the rank that receives more bytes than it
  posted abort inside gloo (SIGABRT, ``op.preamble.length <= op.nbytes``): that rank writes no dump of its
  own (the report lists it under ``missing_ranks`` with "no dump"), unless it runs under the workbook's rank
  shim, whose abort hook writes it as the rank dies.

``read_dumps(folder)`` loads the files (pickle or JSON, any ``<prefix><rank>`` names; an empty or torn
file is noted, not fatal, unless no file is readable), ``analyse(dumps)`` returns an :class:`FRReport`,
``fr_main(folder, as_json)`` prints it for ``python -m nbhelpers doctor --fr DIR`` (exit 0 / 1 / 2).
"""
from __future__ import annotations

import io
import json
import logging
import math
import os
import pickle
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace

from nbhelpers.diagnosis.hang import rank_ranges
from nbhelpers.errors import WorkbookError

__all__ = ["Dumps", "FRDumpError", "FRReport", "RankDump", "analyse", "fr_main", "read_dumps"]

DEFAULT_PG = "default_pg"
_NAME = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?:\.(?:json|pkl|pickle))?$")
_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
           "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}
_KINDS = {"COLLECTIVE_TYPE_MISMATCH": "op", "SIZE_OR_SYNTAX_MISMATCH": "size", "COLLECTIVE_DTYPE_MISMATCH": "dtype",
          "COLLECTIVE_STATE_MISMATCH": "state"}


class FRDumpError(WorkbookError, ValueError):
    """The folder holds no readable Flight Recorder dump."""


@dataclass
class RankDump:
    rank: int
    path: str
    format: str                     # "pickle" or "json"
    version: str
    pg_config: dict
    entries: list[dict]


@dataclass
class Dumps:
    folder: str
    ranks: dict[int, RankDump]
    problems: dict[str, str] = field(default_factory=dict)   # file name -> what is wrong with it
    bad_ranks: dict[int, str] = field(default_factory=dict)  # rank -> why its file could not be used


class _NoClasses(pickle.Unpickler):
    """A dump is dicts, lists, tuples, strings and numbers: refuse anything that would import code."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refers to {module}.{name}, which no Flight Recorder dump does")


def _load(path: str) -> tuple[dict, str]:
    with open(path, "rb") as fh:
        data = fh.read()
    if not data.strip():
        raise ValueError("empty file (the rank was killed before it wrote its dump, or never wrote one)")
    fmt = "json" if data.lstrip()[:1] == b"{" else "pickle"
    try:
        dump = json.loads(data) if fmt == "json" else _NoClasses(io.BytesIO(data)).load()
    except (ValueError, EOFError, pickle.UnpicklingError, UnicodeDecodeError, IndexError, KeyError) as exc:
        raise ValueError(f"torn or not a Flight Recorder dump ({fmt}, {len(data)} bytes): {exc}") from None
    if not isinstance(dump, dict) or not isinstance(dump.get("entries", []), list) or "version" not in dump:
        raise ValueError(f"not a Flight Recorder dump ({fmt} without 'version' and 'entries')")
    return dump, fmt


def _entry(e: dict) -> dict:
    """One entry as torch's builder wants it, whatever format it came in (JSON: lists, 0 for None, no frames)."""
    e = dict(e)
    e["process_group"] = tuple(e.get("process_group") or ("0", DEFAULT_PG))
    e.setdefault("frames", [])
    e.setdefault("p2p_seq_id", 0)
    e.setdefault("is_p2p", False)
    for k in ("input_sizes", "output_sizes", "input_dtypes", "output_dtypes"):
        e.setdefault(k, [])
    return e


def read_dumps(folder) -> Dumps:
    """Every ``<prefix><rank>`` dump file in ``folder``; unreadable ones are listed in ``problems``."""
    folder = os.fspath(folder)
    todo = ("point at the folder holding one file per rank, <prefix><rank> (nccl writes "
            "$TORCH_FR_DUMP_TEMP_FILE<rank>; a gloo job must write torch._C._distributed_c10d._dump_fr_trace() "
            "itself, see nbhelpers.workers.frdump)")
    if not os.path.isdir(folder):
        raise FRDumpError(f"{folder} is not a folder", todo)
    groups: dict[str, dict[int, str]] = defaultdict(dict)
    for name in sorted(os.listdir(folder)):
        m = _NAME.match(name)
        if m and os.path.isfile(os.path.join(folder, name)):
            groups[m["prefix"]].setdefault(int(m["rank"]), name)
    if not groups:
        raise FRDumpError(f"no Flight Recorder dump files in {folder}", todo)
    dumps = Dumps(folder, {})
    prefix = max(groups, key=lambda p: (len(groups[p]), p == ""))
    for other in set(groups) - {prefix}:
        dumps.problems[f"{other}*"] = f"ignored: another set of files ({len(groups[other])}) besides {prefix}*"
    for rank, name in sorted(groups[prefix].items()):
        path = os.path.join(folder, name)
        try:
            d, fmt = _load(path)
        except (OSError, ValueError) as exc:
            dumps.problems[name] = str(exc)
            dumps.bad_ranks[rank] = f"{name}: {exc}"
            continue
        dumps.ranks[rank] = RankDump(rank, path, fmt, str(d["version"]), d.get("pg_config") or {},
                                     [_entry(e) for e in d.get("entries") or []])
    if not dumps.ranks:
        why = "; ".join(f"{n}: {p}" for n, p in dumps.problems.items())
        raise FRDumpError(f"no readable Flight Recorder dump in {folder}: {why}",
                          "the files are empty or cut short: the ranks died while writing them. Write them "
                          "whole (to a temporary name, then os.replace) before the process exits.")
    if not any(d.entries for d in dumps.ranks.values()):
        raise FRDumpError(f"the dumps in {folder} hold no collectives",
                          "the job ran with the Flight Recorder off (TORCH_FR_BUFFER_SIZE=0) or before any "
                          "collective: unset TORCH_FR_BUFFER_SIZE (2000 entries by default) and run it again.")
    return dumps


# ---- the table: one row per rank and collective ------------------------------------------------------------

def _op(e: dict) -> str:
    return e["profiling_name"].split(":", 1)[-1]


def _dtype(e: dict) -> str:
    ds = e["input_dtypes"] or e["output_dtypes"]
    return ",".join(dict.fromkeys(_DTYPES.get(d, str(d).lower()) for d in ds)) or "-"


def _sig(e: dict) -> tuple:
    """What must agree across ranks: op, sizes, dtypes."""
    return (_op(e), json.dumps(e["input_sizes"]), json.dumps(e["output_sizes"]), _dtype(e))


def _sizes(js: str) -> str:
    return ", ".join(json.dumps(x) for x in json.loads(js)) or "no tensor"


def _describe(sig: tuple) -> str:
    """``all_reduce [1048576] float32``; output sizes too where they differ from the input's."""
    op, ins, outs, dt = sig
    out = f" -> {_sizes(outs)}" if outs != ins and json.loads(outs) else ""
    return f"{op} {_sizes(ins)}{out}" + (f" {dt}" if dt != "-" else "")


def _where(e: dict) -> str | None:
    """The innermost frame outside torch: the user's line that issued the collective."""
    for f in e.get("frames") or []:
        fn = str(f.get("filename", ""))
        if "/torch/" not in fn and not fn.startswith("<frozen"):
            return f"{os.path.basename(fn)}:{f.get('line')} in {f.get('name')}"
    return None


def _pg_label(pg: tuple) -> str:
    return pg[1] if pg[1] not in ("", "undefined") else f"group {pg[0]}"


# ---- the report ---------------------------------------------------------------------------------------------

@dataclass
class FRReport:
    folder: str
    ranks: list[int]                      # ranks with a readable dump
    world_size: int
    missing_ranks: list[int]              # no dump, or never reached a collective others did
    no_dump: dict[int, str]               # rank -> why there is nothing to read for it
    table: list[dict]                     # rank x collective: pg, seq, op, in/out sizes, dtype, state
    first_disagreement: dict | None       # seq, pg, kind, groups [{ranks, op, ...}], missing, culprit, why
    culprit_rank: int | None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_disagreement is None and not self.missing_ranks

    def to_dict(self, table: bool = True) -> dict:
        d = {"folder": self.folder, "ok": self.ok, "ranks": self.ranks, "world_size": self.world_size,
             "missing_ranks": self.missing_ranks, "no_dump": {str(k): v for k, v in self.no_dump.items()},
             "first_disagreement": self.first_disagreement, "culprit_rank": self.culprit_rank,
             "verdict": self.text(), "notes": self.notes, "table_rows": len(self.table)}
        if table:
            d["table"] = self.table
        return d

    def text(self) -> str:
        """A short verdict in plain words."""
        fd, lines = self.first_disagreement, []
        if fd is None:
            per_rank = Counter(r["rank"] for r in self.table)
            lines.append(f"No disagreement: the {len(self.ranks)} rank(s) with a dump agree on every collective "
                         f"they share (up to {max(per_rank.values(), default=0)} recorded per rank).")
        else:
            gs, miss = fd["groups"], fd["missing"]
            if len(gs) == 1 and miss:
                g = gs[0]
                at = f", {g['where']}" if g["where"] else ""
                waited = " and waited" if set(g["ranks"]) <= set(fd["last_on"]) else ""
                lines.append(f"collective #{fd['seq']} ({g['desc']} on {fd['pg']}{at}): {_ranks(miss)} never "
                             f"reached it; {_ranks(g['ranks'])} entered it{waited}")
            else:
                parts = [f"{_ranks(g['ranks'])} ran {g['desc']}" for g in gs]
                parts += [f"{_ranks(miss)} never reached it"] if miss else []
                lines.append(f"collective #{fd['seq']} on {fd['pg']}: {fd['kind']} mismatch: " + ", ".join(parts))
            lines += [f"  rank {r}'s last collective there was {last}" for r, last in list(fd["last_before"].items())[:3]]
            lines.append(f"Odd one out: rank {self.culprit_rank} ({fd['why']})" if self.culprit_rank is not None
                         else f"Odd one out: not named ({fd['why']})")
        if self.no_dump:
            lines.append(f"No dump from {_ranks(list(self.no_dump))}: "
                         + "; ".join(f"rank {r}: {w}" for r, w in list(self.no_dump.items())[:3]))
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _ranks(rs) -> str:
    rs = sorted(rs)
    return f"rank {rs[0]}" if len(rs) == 1 else f"ranks {rank_ranges(rs)}"


def _fr():
    """torch's analyser components, its logger (stderr, INFO) quietened first: it prints every mismatch."""
    from torch.distributed.flight_recorder.components.fr_logger import (
        FlightRecorderLogger,
    )

    FlightRecorderLogger().set_log_level(logging.CRITICAL)
    from torch.distributed.flight_recorder.components import builder, utils

    return builder, utils


def _world(dumps: Dumps, world_size: int | None) -> tuple[int, str | None]:
    """The world size and, when the dumps do not record it, a note saying what it was guessed from."""
    if world_size:
        return world_size, None
    files = max([*dumps.ranks, *dumps.bad_ranks]) + 1
    listed = {str(cfg.get("ranks", "[]")) for d in dumps.ranks.values() for cfg in d.pg_config.values()
              if isinstance(cfg, dict)}
    sizes = [len(json.loads(x)) for x in listed if x.startswith("[")]
    gathers = [math.prod(e["output_sizes"][0]) // max(1, math.prod(e["input_sizes"][0]))
               for d in dumps.ranks.values() for e in d.entries
               if e["process_group"][1] == DEFAULT_PG and _op(e).startswith("all_gather")
               and e["input_sizes"] and e["output_sizes"]]
    n = max([files, *sizes, *gathers])
    if max(sizes, default=0) >= n:
        return n, None
    return n, (f"the dumps do not record the world size (gloo files every group under '' in pg_config); "
               f"took {n} from the " + ("all_gathers" if max(gathers, default=0) > files else "file names")
               + "; pass world_size if ranks beyond that left no file")


def _members(dumps: Dumps, world: int) -> dict[tuple, list[int]]:
    """Each group's ranks: the whole world for the default group, the dump's pg_config where it names the
    group (nccl), else the ranks whose entries use it (gloo's pg_config cannot be trusted)."""
    members: dict[tuple, set[int]] = defaultdict(set)
    for d in dumps.ranks.values():
        for e in d.entries:
            members[e["process_group"]].add(d.rank)
    out = {}
    for pg, seen in members.items():
        # a group gathered over the whole world (an all_gather's output is world times its input) holds every
        # rank, whichever of them reached it: a subgroup of new_group() over all ranks, named 'undefined' by gloo
        whole = pg[1] == DEFAULT_PG or any(
            e["process_group"] == pg and _op(e).startswith("all_gather") and e["input_sizes"] and e["output_sizes"]
            and math.prod(e["output_sizes"][0]) == world * max(1, math.prod(e["input_sizes"][0]))
            for d in dumps.ranks.values() for e in d.entries)
        ranks = set(range(world)) if whole else seen
        for d in dumps.ranks.values():
            cfg = d.pg_config.get(pg[0])
            if pg[1] != DEFAULT_PG and cfg and cfg.get("desc") == pg[1]:
                try:
                    ranks = set(json.loads(str(cfg["ranks"]))) or ranks
                except ValueError:
                    pass
                break
        out[pg] = sorted(ranks)
    return out


def _torch_first_failure(dumps: Dumps, members: dict[tuple, list[int]]):
    """Run torch's matcher (``build_collectives``) on the dumps with a sane group table; return its first
    failing Collective (or None).  A collective some ranks never joined comes back with ``pass_check``
    True and ``missing_ranks`` set; one with mismatching ranks with ``pass_check`` False."""
    builder, utils = _fr()
    entries = {r: list(d.entries) for r, d in sorted(dumps.ranks.items())}
    have = set(entries)  # a member without a dump makes torch's matcher give up on the whole group
    # One rank's worth of group config: torch parses every rank's copy of every group's rank list with
    # ast.literal_eval, O(ranks^2) -- 4 s of the 4.4 s at 1024 ranks.  The groups are the same on every rank.
    cfg = {pg[0]: {"desc": pg[1], "ranks": str(sorted(set(rs) & have))} for pg, rs in members.items()}
    version = next(iter(dumps.ranks.values())).version
    entries = utils.align_trace_from_beginning(entries)
    _, groups, _, memberships, guids = builder.build_groups_memberships({min(have): cfg})
    pg_guids = {(uid, r): guid for (uid, _), guid in guids.items() for r in have}
    _, collectives, _ = builder.build_collectives(entries, groups, memberships, pg_guids, version, mismatch_cap=0)
    return next((c for c in collectives if not c.pass_check or c.missing_ranks), None)


def analyse(dumps, world_size: int | None = None) -> FRReport:
    """The report for ``dumps`` (a :class:`Dumps` or a folder).  ``world_size`` overrides the one the dumps
    imply (the highest rank seen, or the largest group in ``pg_config``)."""
    if not isinstance(dumps, Dumps):
        dumps = read_dumps(dumps)
    world, guessed = _world(dumps, world_size)
    notes = [f"{n}: {p}" for n, p in dumps.problems.items() if n.endswith("*")] + ([guessed] if guessed else [])
    versions = {d.version for d in dumps.ranks.values()}
    if len(versions) > 1:
        notes.append(f"dumps come from different Flight Recorder versions {sorted(versions)}")
    no_dump = {r: "no dump file" for r in range(world) if r not in dumps.ranks}
    no_dump.update(dumps.bad_ranks)
    table, by_seq = [], defaultdict(dict)          # (pg, seq) -> rank -> entry
    for r, d in sorted(dumps.ranks.items()):
        for e in d.entries:
            p2p = bool(e["is_p2p"])
            seq = e["p2p_seq_id"] if p2p else e["collective_seq_id"]
            table.append({"rank": r, "pg": _pg_label(e["process_group"]), "seq": seq, "p2p": p2p, "op": _op(e),
                          "in": e["input_sizes"], "out": e["output_sizes"], "dtype": _dtype(e), "state": e["state"]})
            if not p2p:
                by_seq[(e["process_group"], seq)][r] = e
    members = _members(dumps, world)
    try:
        failure = _torch_first_failure(dumps, members)
    except Exception as exc:  # noqa: BLE001 -- torch's matcher asserts on what it does not know (an op name, a p2p pattern)
        failure = None
        notes.append(f"torch's matcher stopped ({type(exc).__name__}: {str(exc)[:160]}); the table is still read")
    fd = None
    failure = _scalar_dtype_split(by_seq, failure) or failure
    if failure is not None:
        pg = next(k for k in by_seq if k[0][0] == failure.group_id and k[1] == failure.collective_seq_id)[0]
        fd = _disagreement(pg, failure, by_seq, members[pg], dumps)
    missing = set(no_dump) | set(fd["missing"] if fd else ())
    return FRReport(dumps.folder, sorted(dumps.ranks), world, sorted(missing), dict(sorted(no_dump.items())),
                    table, fd, fd["culprit"] if fd else None, notes)


def _scalar_dtype_split(by_seq, failure):
    """The first collective, before torch's first failure (in its group), where ranks passed 0-d tensors of
    different dtypes: torch's matcher checks dtypes only where the sizes are not empty (``Op.dtype_mismatch``), so it
    passes over a metric all_reduced as float64 on one rank and float32 on another, the mismatch that makes gloo
    abort the rank that receives the bigger one.  A stand-in for torch's Collective (the fields read here)."""
    for (pg, seq), per_rank in sorted(by_seq.items(), key=lambda kv: kv[0][1]):
        if failure is not None and pg[0] == failure.group_id and seq >= failure.collective_seq_id:
            continue
        if len(per_rank) > 1 and all(e["input_sizes"] == [[]] for e in per_rank.values()) and \
                len({_op(e) for e in per_rank.values()}) == 1 and len({_dtype(e) for e in per_rank.values()}) > 1:
            return SimpleNamespace(group_id=pg[0], collective_seq_id=seq, missing_ranks=set(), mismatch_collectives={},
                                   type_of_mismatch="0-d tensors of different dtypes (torch's matcher skips them)")
    return None


def _disagreement(pg, failure, by_seq, members, dumps) -> dict:
    seq = failure.collective_seq_id
    here = by_seq[(pg, seq)]
    groups: dict[tuple, list[int]] = defaultdict(list)
    for r, e in sorted(here.items()):
        groups[_sig(e)].append(r)
    missing = [r for r in members if r in dumps.ranks and r not in here]
    kinds = {_KINDS.get(c.type_of_mismatch.state.name, "size") for c in (failure.mismatch_collectives or {}).values()
             if c.type_of_mismatch is not None}
    if failure.missing_ranks or (missing and len(groups) == 1):
        kind = "missing"
    elif kinds:
        kind = "op" if "op" in kinds else min(kinds)
    else:
        ops = {s[0] for s in groups}
        kind = "op" if len(ops) > 1 else "dtype" if len({s[3] for s in groups}) > 1 else "size"
    usual = {}  # signature -> earlier seqs where every rank with a dump ran exactly it
    for (p, s), per_rank in by_seq.items():
        if p == pg and s < seq and len(per_rank) == len([r for r in members if r in dumps.ranks]):
            sigs = {_sig(e) for e in per_rank.values()}
            if len(sigs) == 1:
                usual.setdefault(sigs.pop(), []).append(s)
    culprit, why, by = _odd_one_out(groups, missing, usual)
    last_on = {r for r, d in dumps.ranks.items()
               if [e for e in d.entries if e["process_group"] == pg and not e["is_p2p"]][-1:] == [here.get(r)]}
    last_before = {}
    for r in missing:
        prev = [e for e in dumps.ranks[r].entries if e["process_group"] == pg and not e["is_p2p"]]
        last_before[r] = f"#{prev[-1]['collective_seq_id']} {_describe(_sig(prev[-1]))}" if prev else "none"
    return {"seq": seq, "pg": _pg_label(pg), "kind": kind, "missing": missing, "culprit": culprit, "by": by,
            "why": why,
            "groups": [{"ranks": rs, "op": s[0], "sizes": _sizes(s[1]), "dtype": s[3], "desc": _describe(s),
                        "where": _where(here[rs[0]])}
                       for s, rs in sorted(groups.items(), key=lambda kv: -len(kv[1]))],
            "last_on": sorted(last_on), "last_before": last_before,
            "torch": str(failure.type_of_mismatch or "") or (
                "not all ranks joining" if failure.missing_ranks else
                "; ".join(f"rank {r}: {c.type_of_mismatch}" for r, c in sorted((failure.mismatch_collectives or {}).items())[:3]))}


def _odd_one_out(groups: dict[tuple, list[int]], missing: list[int],
                 usual: dict) -> tuple[int | None, str, str | None]:
    """The single rank that did something else (or None), why, and how it was found: it never reached what the
    others are in ("missing"), the others agree ("majority"), or it alone issued a collective no rank had issued
    before while a peer ran a usual one ("new")."""
    sets = [(s, rs) for s, rs in groups.items()] + ([(None, missing)] if missing else [])
    total = sum(len(rs) for _, rs in sets)
    big = max(sets, key=lambda x: len(x[1]))
    if len(big[1]) * 2 > total:
        odd = [r for s, rs in sets if s != big[0] for r in rs]
        if len(odd) == 1:
            return odd[0], f"the other {len(big[1])} ranks agree", "missing" if odd[0] in missing else "majority"
        return None, f"{len(odd)} ranks differ from the majority of {len(big[1])}", None
    def seen(s):
        return f"#{', #'.join(map(str, usual[s][-3:]))}"
    odd = [(s, rs) for s, rs in groups.items() if s not in usual]
    if missing and not odd:
        if len(missing) == 1:
            return missing[0], (f"no majority; the others wait in a routine collective, one every rank ran at "
                                f"{seen(next(iter(groups)))}" if len(groups) == 1
                                else "no majority; the others ran collectives every rank ran before"), "missing"
        return None, "no majority, and several ranks never reached it", None
    if len(odd) == 1 and len(odd[0][1]) == 1 and missing and len(groups) == 1:
        why = (f"rank {odd[0][1][0]} ran a collective no rank had run before, which {_ranks(missing)} never reached: "
               "a call the others skipped, or one only it makes; the records alone cannot tell which")
        return None, why, None
    if len(odd) == 1 and len(odd[0][1]) == 1 and len(groups) > 1:
        s, rs = odd[0]
        fine = [u for u in groups if u in usual]
        ref = f"; {_describe(fine[0])} is what every rank ran at {seen(fine[0])}" if fine else ""
        return rs[0], f"no majority; its {_describe(s)} never ran before on any rank{ref}", "new"
    return None, "no majority, and the recorded history does not single one out", None


def fr_main(folder: str, as_json: bool = False) -> int:
    """``doctor --fr DIR``: print the verdict (text, or one JSON object); 0 = the ranks agree and every rank
    left a dump, 1 = a disagreement or a rank without a dump, 2 = nothing readable (one line on stderr)."""
    try:
        rep = analyse(read_dumps(folder))
    except FRDumpError as exc:
        print(f"error: {exc.what}. What to do: {exc.todo}".replace("\n", " "), file=sys.stderr)
        return 2
    print(json.dumps(rep.to_dict(table=False), default=str) if as_json else rep.text())
    return 0 if rep.ok else 1
