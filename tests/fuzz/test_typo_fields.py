"""A misspelled field is reported as the unknown field it is, not as the required field it
leaves out (pydantic lists the missing one first: ``cluster.servers: got None; allowed: a
required field`` sent users looking for a field they had written). One rename per input kind,
of a required field where there is one, through the in-process CLI: the one error line names
the typo and lists the known fields of its object (:func:`traffic.decode.first_error`)."""

from __future__ import annotations

import json

import pytest
import yaml
from fuzz_kinds import KINDS, run_case

from tests.flowsim.test_netsim_json import rename_key

# kind -> (path of the key to rename, the typo, the known fields the line lists)
RENAMES = {
    "plan-yaml": (("cluster", "servers"), "servesr", "known fields: servers, gpus_per_server, "),
    "plan-json": (("model",), "modle", "known fields: model, parallelism, precision, "),
    "plan-fields": (("cluster", "gpus_per_server"), "gpus_per_servre", "gpus_per_server, "),
    "design": (("rings", 0, "phase"), "phaes", "known fields: phase, group, members, order, "),
    "design-hybrid": (("electrical", "family"), "famiyl", "known fields: family, servers, "),
    "flows": (("flows", 0, "bytes"), "bytse", "known fields: id, bytes, start, after, paths"),
    "circuits-json": (("circuits",), "circuist", "known fields: circuits"),
    "cluster-jobs": (("jobs", 0, "name"), "naem", "known fields: name, plan, servers"),
    "cluster-arrivals": (("events", 0, "time_s"), "times_", "known fields: time_s, arrive, "),
    "advise-jobs": ((0, "plan"), "plna", "known fields: plan, weight"),
    "hardware": (("gpus", "fuzz-gpu", "label"), "lable", "known fields: label, bf16_tflops, "),
    "prices": (("fibre", "capex_usd"), "capex_uds", "known fields: capex_usd, power_w, source"),
}


def test_every_kind_with_fields_has_a_rename():
    no_keys = {"prewired-json"}  # rows of numbers
    assert set(RENAMES) == {k for k, kind in KINDS.items() if kind.fmt != "text"} - no_keys


@pytest.mark.parametrize("kind", sorted(RENAMES))
def test_a_misspelled_field_is_named_with_the_known_ones(tmp_path, kind):
    k = KINDS[kind]
    path, typo, known = RENAMES[kind]
    text = k.seed_bytes().decode()
    doc = rename_key(json.loads(text) if k.fmt == "json" else yaml.safe_load(text), path, typo)
    case = tmp_path / f"case{k.suffix}"
    case.write_text(json.dumps(doc) if k.fmt == "json" else yaml.safe_dump(doc))
    out = run_case(k, case)
    assert out.exit_code == 2 and not out.problem, out
    (line,) = out.stderr.strip().splitlines()
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in (*path[:-1], typo))
    assert f"{where.lstrip('.')}: got '{typo}'; allowed: no such field; " in line, line
    assert known in line, line
