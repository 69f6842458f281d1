"""The validation error `distdeck estimate` and /api/estimate print comes from the validation tables themselves.

simulations/estimate/validation.json holds every row of the validation tests' tables with its error; this test
recomputes them from the tables and the estimator and fails if the file is stale. Regenerate with
`.venv/bin/python -m tests.unit.test_estimate_trust --write`.
"""

from __future__ import annotations

import json
import sys

import pytest

from simulations.estimate import trust
from tests.unit import test_estimate_heldout as heldout
from tests.unit import test_estimate_other_stacks as other
from tests.unit import test_estimate_more_stacks as more_stacks
from tests.unit import test_estimate_torchtitan_h100 as torchtitan_h100
from tests.unit import test_estimate_torchtitan_nd as torchtitan_nd
from tests.unit import test_estimate_validation as validation


def _rows():
    tables = {
        "Narayanan SC'21 Table 1": ("a100-80gb", validation.narayanan_rows()),
        "Korthikanti 2022 Table 5": ("a100-80gb", validation.korthikanti_rows()),
        "NeMo 24.09 Llama 3.1 (dgxc)": ("h100-80gb", validation.nemo_rows()),
        **{f"dgxc 24.11.1 {name}": ("h100-80gb", heldout.nemo_rows(name)) for name in heldout.NEMO_TABLES},
        "Llama 3 Table 4": ("h100-80gb", heldout.llama3_rows()),
        "Megatron-Core r0.8.0": ("h100-80gb", heldout.megatron_rows()),
        "BLOOM-176B logs": ("a100-80gb", heldout.bloom_rows()),
        **{f"LLM Foundry {name}": (gpu, other.foundry_rows(name)) for name, (gpu, _) in other.TABLES.items()},
        **{name: (None, more_stacks.table_rows(name)) for name in more_stacks.TABLES},
        **{name: (None, torchtitan_h100.table_rows(name)) for name in torchtitan_h100.TABLES},
        torchtitan_nd.TABLE: (None, torchtitan_nd.table_rows()),
    }
    out = []
    for table, (gpu, rows) in tables.items():
        for name, _, _, _, error, e in rows:
            out.append({"table": table, "row": name, "gpu": e.cluster.gpu.name,
                        "kind": trust.layout_kind(e.layout.tp, e.layout.pp, e.layout.cp, e.layout.zero_stage),
                        "error": round(error, 4)})
    return out


def test_the_validation_file_is_what_the_tables_give():
    stored = json.loads(trust.VALIDATION.read_text())["rows"]
    assert stored == _rows(), "stale: run `.venv/bin/python -m tests.unit.test_estimate_trust --write`"


def test_trust_names_runs_of_the_same_kind():
    """Same GPU and same kind of layout: sharded (ZeRO-3, FSDP, HSDP, with or without TP or CP inside), whole replicas
    (DDP, ZeRO-1/2), or split by TP, PP or CP."""
    sharded = trust.trust("h100-80gb", tp=1, pp=1, cp=1, zero_stage=3)
    assert {"LLM Foundry h100", "fms-fsdp H100", "Pax GPT H100 (JAX)"} <= set(sharded["tables"])
    assert not {"NeMo 24.09 Llama 3.1 (dgxc)", "Llama 3 Table 4"} & set(sharded["tables"])
    # FSDP with CP or TP inside is still sharded: the FSDP stacks vouch for it, not the Megatron-family runs
    assert trust.trust("h100-80gb", tp=2, pp=1, cp=4, zero_stage=3) == sharded
    sharded_a100 = trust.trust("a100-80gb", tp=1, pp=1, cp=1, zero_stage=3)
    assert {"torchtitan Llama 3 A100", "torchtitan Llama 2 A100", "fms-fsdp A100", "LLM Foundry a100-40gb"} <= set(
        sharded_a100["tables"])
    replicas = trust.trust("a100-80gb", tp=1, pp=1, cp=1, zero_stage=0)
    assert "Narayanan SC'21 Table 1" in replicas["tables"] and "fms-fsdp A100" not in replicas["tables"]
    model = trust.trust("a100-80gb", tp=8, pp=4, cp=1, zero_stage=1)
    assert set(model["tables"]) == {"Narayanan SC'21 Table 1", "Korthikanti 2022 Table 5", "BLOOM-176B logs"}
    context = trust.trust("h100-80gb", tp=1, pp=1, cp=2, zero_stage=1)  # context parallelism splits the sequence
    assert "dgxc 24.11.1 llama3.1-8b" in context["tables"] and "fms-fsdp H100" not in context["tables"]
    b200 = trust.trust("b200", tp=8, pp=1, cp=1, zero_stage=1)
    assert "none published on B200" in b200["scope"] and b200["runs"] > 0
    assert 0 < sharded["median_error"] <= sharded["worst_error"]
    assert sharded["summary"] == trust.sentence(sharded) and "published sharded runs on H100" in sharded["summary"]


def test_overall_is_every_row_with_its_worst():
    """What the layout chooser's note states (slides/sections/12-conclusion/layout-chooser.html.j2)."""
    rows = _rows()
    summary = trust.overall()
    assert summary["runs"] == len(rows) and summary["tables"] == len({r["table"] for r in rows})
    worst = max(rows, key=lambda r: abs(r["error"]))
    assert summary["worst"] == {"table": worst["table"], "row": worst["row"], "error": worst["error"]}
    errors = [abs(r["error"]) for r in rows]  # the median splits the rows in two
    assert sum(e <= summary["median_error"] for e in errors) >= len(rows) / 2
    assert sum(e >= summary["median_error"] for e in errors) >= len(rows) / 2


if __name__ == "__main__" and "--write" in sys.argv:
    trust.VALIDATION.write_text(json.dumps({"source": "tests/unit/test_estimate_trust.py", "rows": _rows()},
                                           indent=1) + "\n")
    print(f"wrote {len(_rows())} rows to {trust.VALIDATION}")
elif __name__ == "__main__":
    pytest.main([__file__])
