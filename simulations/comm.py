"""torch.distributed, traced: the same calls, each one recorded with its real bytes and wall time.

Scenarios call these instead of `dist.*` so the algorithm reads as usual while
every message lands in the trace. Bytes are the bytes of the tensors handed to
the op: for send/recv exactly what crossed the wire; for a collective the size
of this rank's buffer (the formulas in REFERENCE.md turn that into wire bytes).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from simulations import trace


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def send(t: torch.Tensor, dst: int, group=None, *, chunk: int | None = None, name: str | None = None,
         show_values: bool = True) -> None:
    tr = trace.current()
    start = tr.now()
    dist.send(t, dst=_global(dst, group), group=group)
    end = tr.now()  # the op's time, before its values are read
    _record_send(tr, t, dst, group, chunk, name, _values(tr, t, show_values), start, end)


def recv(t: torch.Tensor, src: int, group=None, *, tag: int = 0) -> torch.Tensor:
    tr = trace.current()
    with tr.span(f"recv←{src}", kind="comm", bytes=_nbytes(t)):
        dist.recv(t, src=_global(src, group), group=group, tag=tag)
    return t


def isend(t: torch.Tensor, dst: int, group=None, *, tag: int = 0, chunk: int | None = None,
          name: str | None = None, show_values: bool = True):
    """Post a send and return at once with its work handle (wait on it later; keep `t` alive until then).

    A blocking send waits for the receiver to post its receive; a pipeline stage must not, or two
    neighbours sending to each other deadlock. The transfer is recorded when it is posted. `tag`
    tells apart messages between the same two ranks (an activation and a gradient of the same shape).
    """
    tr = trace.current()
    start = tr.now()
    work = dist.isend(t, dst=_global(dst, group), group=group, tag=tag)
    end = tr.now()
    _record_send(tr, t, dst, group, chunk, name, _values(tr, t, show_values), start, end)
    return work


def sendrecv(send_t: torch.Tensor, dst: int, recv_t: torch.Tensor, src: int, group=None, *,
             chunk: int | None = None, name: str | None = None) -> torch.Tensor:
    """Send to one peer while receiving from another (a ring step); both in flight at once, so no deadlock."""
    return sendrecv_async(send_t, dst, recv_t, src, group, chunk=chunk, name=name).wait()


class PendingSendRecv:
    """A ring step in flight (from `sendrecv_async`): `wait()` finishes it and records the transfer,
    spanning from the start to the wait, so the compute done meanwhile shows as overlapped."""

    def __init__(self, reqs, recv_t: torch.Tensor, record) -> None:
        self._reqs, self._recv_t, self._record = reqs, recv_t, record

    def wait(self) -> torch.Tensor:
        for req in self._reqs:
            req.wait()
        self._record()
        return self._recv_t


def sendrecv_async(send_t: torch.Tensor, dst: int, recv_t: torch.Tensor, src: int, group=None, *,
                   chunk: int | None = None, name: str | None = None) -> PendingSendRecv:
    """Start a sendrecv and return at once: compute on something else, then `.wait()` before reading recv_t."""
    tr = trace.current()
    start = tr.now()
    ops = [dist.P2POp(dist.isend, send_t, _global(dst, group), group),
           dist.P2POp(dist.irecv, recv_t, _global(src, group), group)]
    reqs = dist.batch_isend_irecv(ops)
    values = _values(tr, send_t, True)

    def record() -> None:
        _record_send(tr, send_t, dst, group, chunk, name, values, start, tr.now())

    return PendingSendRecv(reqs, recv_t, record)


def _values(tr: trace.Tracer, t: torch.Tensor, show: bool) -> trace.Snapshot | None:
    """The payload's values, kept (a snapshot, read when the fragment leaves the rank) before the caller may
    reuse the buffer (once the op returns)."""
    return trace.snapshot(t) if show and tr.enabled else None


def _record_send(tr: trace.Tracer, t: torch.Tensor, dst: int, group, chunk: int | None, name: str | None,
                 values: trace.Snapshot | None, start: float, end: float) -> None:
    """One message as a transfer: its bytes, its destination as a global rank, its payload when small."""
    tr.transfer("send", _nbytes(t), dst=_global(dst, group), group=_name(group), chunk=chunk, tensor=name,
                values=values, start=start, end=end)


def _collective(op: str, t_in: torch.Tensor, group, fn) -> None:
    tr = trace.current()
    start = tr.now()
    fn()
    tr.transfer(op, _nbytes(t_in), group=_name(group), start=start, end=tr.now())


def all_reduce(t: torch.Tensor, group=None, op=dist.ReduceOp.SUM) -> torch.Tensor:
    _collective("all_reduce", t, group, lambda: dist.all_reduce(t, op=op, group=group))
    return t


def all_gather_into_tensor(out: torch.Tensor, shard: torch.Tensor, group=None) -> torch.Tensor:
    _collective("all_gather", shard, group, lambda: dist.all_gather_into_tensor(out, shard, group=group))
    return out


def reduce_scatter_tensor(out: torch.Tensor, full: torch.Tensor, group=None,
                          op=dist.ReduceOp.SUM) -> torch.Tensor:
    _collective("reduce_scatter", full, group, lambda: dist.reduce_scatter_tensor(out, full, op=op, group=group))
    return out


def all_to_all_single(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int] | None = None,
                      in_splits: list[int] | None = None, group=None) -> torch.Tensor:
    _collective("all_to_all", inp, group,
                lambda: dist.all_to_all_single(out, inp, out_splits, in_splits, group=group))
    return out


def broadcast(t: torch.Tensor, src: int, group=None) -> torch.Tensor:
    _collective("broadcast", t, group, lambda: dist.broadcast(t, src=_global(src, group), group=group))
    return t


def _global(rank: int, group) -> int:
    """Group rank -> global rank (the pool's groups are ranks 0..n-1, so they agree; torchrun too)."""
    if group is None or group is dist.group.WORLD:
        return rank
    return dist.get_global_rank(group, rank)


_group_names: dict[int, str] = {}


def name_group(group, name: str) -> None:
    """Label a process group ("tp", "dp", "pp", ...) so its transfers say which mesh dimension they ran on."""
    _group_names[id(group)] = name


def _name(group) -> str:
    if group is None or group is dist.group.WORLD:
        return "world"
    return _group_names.get(id(group), "group")



_subgroups: dict[tuple[str, tuple[int, ...]], dist.ProcessGroup] = {}


def subgroup(ranks, parent, tag: str = "") -> dist.ProcessGroup:
    """This rank's sub-group of `parent` (a mesh dimension's group), made once per process.

    Every rank of `parent` calls this at the same point, each with the ranks of its own
    sub-group (global ranks, containing itself). Only members create a group
    (`use_local_synchronization=True`), since the pool's default world has more processes than
    a run uses. torch names such a group by hashing its ranks with the number of groups the
    calling process already has (pytorch/pytorch#173608), and the pool's ranks belong to
    different numbers of groups; so the ranks first agree on that number and pad up to it with
    one-rank groups, or members would look for each other under different names and hang.
    `tag` keeps groups of the same ranks apart (a one-rank "dp" and "pp" group), so each keeps its label.
    """
    from torch.distributed.distributed_c10d import _world  # the per-process group registry

    key = (tag, tuple(sorted(ranks)))
    missing = key not in _subgroups
    agree = torch.tensor([len(_world.pg_names), int(missing)])
    dist.all_reduce(agree, op=dist.ReduceOp.MAX, group=parent)  # set-up, not part of any algorithm
    if agree[1]:
        me = dist.get_rank()
        while len(_world.pg_names) < int(agree[0]):
            dist.new_group([me], use_local_synchronization=True)
        if missing:
            _subgroups[key] = dist.new_group(list(key[1]), use_local_synchronization=True)
    return _subgroups[key]
