"""How long a collective takes: its algorithm, its group's placement, the links it crosses.

A group of `size` ranks with `per_node` of them in each node. Inside a node a ring runs over
NVLink at the GPU's link bandwidth. Across nodes NCCL runs one ring per channel, each leaving the
node through its own NIC, with the node's ranks next to each other in the ring: only the hops
between nodes cross the network, so what limits the ring is the bytes that leave a node over
all its NICs together (the node egress), shared by the groups that run at the same time on that
node: gpus_per_node / per_node of them (scaling book, gpus.md, "Cross-node collectives":
T = max(bytes / W_GPU egress, bytes / W_node egress), and the sharded-axis form).

Per rank of a ring all-reduce of S bytes: 2(N−1) steps of S/N, so the time is
2(N−1)/N · S / bandwidth + latency; an all-gather or a reduce-scatter is half of it.
The byte counts come from simulations.formulas, the same functions the live runs check against.

What grows with the nodes: a ring's latency, 2(N−1) steps of which the 2(nodes−1) that leave a node pay the
network's per-step latency (NCCL's model, ring_latency), so a reduction over hundreds of nodes waits milliseconds
per call; the tree and PAT algorithms are taken where their log-depth latency is shorter. Network tiers beyond one
leaf group are not charged: NVIDIA's reference fabrics are "full non-blocking fat tree[s]" in a "leaf-spine manner",
"rail-optimized" (NVIDIA Enterprise Reference Architecture, HGX AI Factory H100/H200/B200, "Networking Physical
Topologies"; DGX SuperPOD builds them of 32-node scalable units), so crossing the spine costs no bandwidth, and its
extra switch hops (well under a microsecond each) are inside the 14 µs a network step already pays in NCCL's model,
which has no tier term either. An oversubscribed fabric would be slower than this model says: `--network-gbps`
states what a node really gets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulations import formulas
from simulations.hardware import (
    HALF_BANDWIDTH_BYTES_AT_450,
    NCCL_BASE_US,
    NCCL_PAT_BANDWIDTH,
    NCCL_PAT_LEVEL_US,
    NCCL_PAT_RANK_US,
    NCCL_RING_STEP_US,
    NCCL_TREE_STEP_US,
    NETWORK_EFFICIENCY,
    NVLINK_BUS_EFFICIENCY,
    Cluster,
)


@dataclass(frozen=True)
class Group:
    """A communication group's size and placement: `per_node` of its ranks share each node."""

    size: int
    per_node: int

    @property
    def nodes(self) -> int:
        return self.size // self.per_node

    @property
    def crosses_nodes(self) -> bool:
        return self.size > self.per_node


def place(size: int, stride: int, gpus_per_node: int) -> Group:
    """The group of `size` ranks `stride` apart (the product of the faster-varying dimensions)."""
    if size <= 1:
        return Group(1, 1)
    if stride >= gpus_per_node:
        return Group(size, 1)
    return Group(size, max(1, min(size, gpus_per_node // stride)))


def ring_bandwidth(group: Group, cluster: Cluster) -> float:
    """Bytes/s at which a ring moves one step's data: NVLink inside, the node's share of egress across."""
    nvlink = cluster.gpu.nvlink_bandwidth * NVLINK_BUS_EFFICIENCY
    if not group.crosses_nodes:
        return nvlink
    concurrent = cluster.gpus_per_node / group.per_node  # groups of this kind on one node, all busy at once
    network = cluster.node_egress * NETWORK_EFFICIENCY / concurrent
    return min(nvlink, network) if group.per_node > 1 else network


def ramp(size: float, bandwidth: float) -> float:
    """Bandwidth a message of `size` bytes gets: NCCL pipelines chunks through its channels, so small
    messages do not fill the links; half the bandwidth at a size proportional to the bandwidth."""
    half = HALF_BANDWIDTH_BYTES_AT_450 * bandwidth / 450e9
    return bandwidth * size / (size + half)


def ring_latency(group: Group, reduce: bool) -> float:
    """NCCL's ring: 2(N−1) steps for an all-reduce (`reduce`), N−1 for an all-gather or a reduce-scatter;
    the 2(nodes−1) or nodes−1 steps that cross between nodes at the network's latency, the rest NVLink's."""
    steps = (2 if reduce else 1) * (group.size - 1)
    inter = (2 if reduce else 1) * (group.nodes - 1) if group.crosses_nodes else 0
    return (NCCL_BASE_US["ring"] + (steps - inter) * NCCL_RING_STEP_US["nvlink"]
            + inter * NCCL_RING_STEP_US["network"]) * 1e-6


def tree_latency(group: Group) -> float:
    """NCCL's tree all-reduce: up and down the node's ranks and log2(nodes) levels between nodes."""
    return (NCCL_BASE_US["tree"] + 2 * ((group.per_node - 1) * NCCL_TREE_STEP_US["nvlink"]
                                        + math.ceil(math.log2(group.nodes)) * NCCL_TREE_STEP_US["network"])) * 1e-6


def pat_latency(group: Group) -> float:
    """NCCL's PAT all-gather / reduce-scatter (one GPU per node): a log-depth part and a linear one."""
    return (NCCL_BASE_US["pat"] + math.ceil(math.log2(group.nodes)) * NCCL_PAT_LEVEL_US
            + group.size * NCCL_PAT_RANK_US) * 1e-6


def all_reduce(size: float, group: Group, cluster: Cluster) -> float:
    """Seconds for an all-reduce of `size` bytes on every rank of `group`: NCCL's ring, or its tree when
    the tree's latency makes it faster (large groups across nodes)."""
    if group.size <= 1 or size <= 0:
        return 0.0
    sent = formulas.ring_all_reduce_bytes(size, group.size)
    moving = sent / ramp(size, ring_bandwidth(group, cluster))
    if not group.crosses_nodes:
        return moving + ring_latency(group, reduce=True)
    return moving + min(ring_latency(group, reduce=True), tree_latency(group))


def all_gather(size: float, group: Group, cluster: Cluster) -> float:
    """Seconds for an all-gather (or a reduce-scatter) whose whole is `size` bytes: NCCL's ring, which has no
    tree for these; with one GPU per node, its PAT algorithm when that is faster."""
    if group.size <= 1 or size <= 0:
        return 0.0
    sent = formulas.all_gather_bytes(size, group.size)
    moving = sent / ramp(size, ring_bandwidth(group, cluster))
    ring = moving + ring_latency(group, reduce=False)
    if group.crosses_nodes and group.per_node == 1:
        return min(ring, moving / NCCL_PAT_BANDWIDTH + pat_latency(group))
    return ring


reduce_scatter = all_gather


def all_to_all(size: float, group: Group, cluster: Cluster) -> float:
    """Each rank sends (N−1)/N of its `size` bytes, spread over the others; across nodes the node's
    GPUs all send at once through its egress (scaling book, gpus.md, AllToAll)."""
    if group.size <= 1 or size <= 0:
        return 0.0
    n = group.size
    nvlink = cluster.gpu.nvlink_bandwidth * NVLINK_BUS_EFFICIENCY
    inside = (group.per_node - 1) / n * size / nvlink
    leaving = (n - group.per_node) / n * size
    network = leaving * cluster.gpus_per_node / (cluster.node_egress * NETWORK_EFFICIENCY) if leaving else 0.0
    return max(inside, network) + point_to_point_latency(group.crosses_nodes)


def point_to_point_latency(across_nodes: bool) -> float:
    """One step of NCCL's ring: what a send, or an all-to-all whose peers are all reached at once, waits."""
    return (NCCL_BASE_US["ring"] + NCCL_RING_STEP_US["network" if across_nodes else "nvlink"]) * 1e-6


def send(size: float, across_nodes: bool, cluster: Cluster) -> float:
    """A point-to-point send of `size` bytes while every GPU of the node sends its own (pipeline stages)."""
    if size <= 0:
        return 0.0
    if across_nodes:
        bandwidth = cluster.node_egress * NETWORK_EFFICIENCY / cluster.gpus_per_node
        return size / bandwidth + point_to_point_latency(True)
    return size / (cluster.gpu.nvlink_bandwidth * NVLINK_BUS_EFFICIENCY) + point_to_point_latency(False)
