"""Where a published row's step time goes in the estimator: for each validation row whose |error| is at least a
threshold, predicted against published throughput, the step's parts (compute, optimizer, straggler allowance), each
kind of communication's total and exposed seconds, the bytes each GPU sends per step, the node's network, and the
error the row would have if every collective were exposed (the most communication could add: if that is still too
fast, the gap is not in the communication model).

    .venv/bin/python scripts/estimate_breakdown.py [--min-error 0.18]
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tests.unit import test_estimate_more_stacks as more  # noqa: E402
from tests.unit import test_estimate_other_stacks as other  # noqa: E402
from tests.unit import test_estimate_torchtitan_h100 as torchtitan_h100  # noqa: E402
from tests.unit import test_estimate_torchtitan_nd as torchtitan_nd  # noqa: E402


def rows():
    for table in more.TABLES:
        for name, _gpus, published, predicted, error, e in more.table_rows(table):
            yield table, name, published, predicted, error, e
    for table in torchtitan_h100.TABLES:
        for name, _gpus, published, predicted, error, e in torchtitan_h100.table_rows(table):
            yield table, name, published, predicted, error, e
    for name, _gpus, published, predicted, error, e in torchtitan_nd.table_rows():
        yield torchtitan_nd.TABLE, name, published, predicted, error, e
    for table in other.TABLES:
        for name, _gpus, published, predicted, error, e in other.foundry_rows(table):
            yield f"LLM Foundry {table}", name, published, predicted, error, e


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-error", type=float, default=0.18)
    threshold = parser.parse_args().min_error
    for table, name, published, predicted, error, e in rows():
        if abs(error) < threshold:
            continue
        serial = e.step_time_s - e.exposed_comm_s - e.exposed_by_kind.get("pp", 0.0) + sum(
            v for k, v in e.comm_total_s.items() if k != "pp")
        print(f"{table} | {e.cluster.gpus} GPUs {name}: predicted {predicted:,.0f} against {published:,.0f} per GPU "
              f"({error:+.1%}); every collective exposed: {e.step_time_s / serial * (1 + error) - 1:+.1%}")
        print(f"  step {e.step_time_s * 1e3:.1f} ms = compute {e.compute_s * 1e3:.1f}, optimizer "
              f"{e.optimizer_s * 1e3:.1f}, straggler {e.straggler_s * 1e3:.1f}, exposed comm {e.exposed_comm_s * 1e3:.1f}"
              f" (micro-batch {e.layout.micro_batch} x {e.micro_batches}, ZeRO {e.layout.zero_stage}, "
              f"gradients reduced in {8 * e.layout.grad_reduce_bytes}-bit)")
        for kind, total in e.comm_total_s.items():
            if total:
                print(f"  {kind:6s} total {total * 1e3:8.1f} ms, exposed {e.exposed_by_kind.get(kind, 0.0) * 1e3:7.1f} ms,"
                      f" sent {e.comm_bytes_per_gpu.get(kind, 0.0) / 1e9:8.2f} GB per GPU")
        print(f"  network {e.cluster.node_egress * 8 / 1e9:.0f} Gb/s a node of {e.cluster.gpus_per_node}; "
              f"memory {e.memory_per_gpu_bytes['total'] / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
