"""GPU catalogue and cluster hardware.

Figures are vendor datasheet values for dense (non-sparse) math. The casebook's threshold batch sizes
(H200 206, H100 295) come from dense BF16 TFLOP/s over HBM bandwidth, so `bf16_tflops` must be the dense
figure. Prices are on-demand cloud list prices used only for cost per 1M tokens; override them per
scenario with `price_per_gpu_hour`.
"""

from __future__ import annotations

import msgspec


class GpuSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU model's datasheet figures."""

    name: str
    # The datasheet's memory size, read as GiB wherever memory is budgeted (an "80 GB" H100 shows 79.6 GiB
    # to the driver, an "80GB" A100 80 GiB: the datasheet figures are binary sizes, rounded).
    hbm_gb: float
    hbm_bandwidth_tbps: float
    bf16_tflops: float
    fp8_tflops: float
    nvlink_gbps: float
    pcie_gbps: float
    price_per_gpu_hour: float
    supports_fp8: bool = True
    provenance: str = ""


GPU_CATALOGUE: dict[str, GpuSpec] = {
    "H100-SXM": GpuSpec(
        name="H100-SXM", hbm_gb=80, hbm_bandwidth_tbps=3.35, bf16_tflops=989, fp8_tflops=1979,
        nvlink_gbps=900, pcie_gbps=64, price_per_gpu_hour=3.0,
        provenance="NVIDIA H100 SXM5 datasheet (dense); PCIe 5.0 x16 64 GB/s as in casebook case 2; price assumed",
    ),
    "H200-SXM": GpuSpec(
        name="H200-SXM", hbm_gb=141, hbm_bandwidth_tbps=4.8, bf16_tflops=989, fp8_tflops=1979,
        nvlink_gbps=900, pcie_gbps=64, price_per_gpu_hour=4.0,
        provenance="NVIDIA H200 SXM datasheet (dense); price $32/node-hour from casebook case 5",
    ),
    "B200": GpuSpec(
        name="B200", hbm_gb=180, hbm_bandwidth_tbps=8.0, bf16_tflops=2250, fp8_tflops=4500,
        nvlink_gbps=1800, pcie_gbps=64, price_per_gpu_hour=6.0,
        provenance="NVIDIA HGX B200 datasheet (dense, per GPU); price assumed",
    ),
    "A100-80GB": GpuSpec(
        name="A100-80GB", hbm_gb=80, hbm_bandwidth_tbps=2.039, bf16_tflops=312, fp8_tflops=312,
        nvlink_gbps=600, pcie_gbps=32, price_per_gpu_hour=1.8, supports_fp8=False,
        provenance="NVIDIA A100 80GB SXM datasheet; no FP8 tensor cores (FP8 runs as weight-only at BF16 rate)",
    ),
    "L40S": GpuSpec(
        name="L40S", hbm_gb=48, hbm_bandwidth_tbps=0.864, bf16_tflops=362, fp8_tflops=733,
        nvlink_gbps=0, pcie_gbps=32, price_per_gpu_hour=1.2,
        provenance="NVIDIA L40S datasheet (dense, GDDR6, no NVLink); price assumed",
    ),
    "A100-40GB": GpuSpec(
        name="A100-40GB", hbm_gb=40, hbm_bandwidth_tbps=1.555, bf16_tflops=312, fp8_tflops=312,
        nvlink_gbps=600, pcie_gbps=32, price_per_gpu_hour=1.4, supports_fp8=False,
        provenance="NVIDIA A100 40GB SXM datasheet; no FP8 tensor cores (FP8 runs as weight-only at BF16 rate); "
                   "price assumed",
    ),
    "H20": GpuSpec(
        name="H20", hbm_gb=96, hbm_bandwidth_tbps=4.0, bf16_tflops=148, fp8_tflops=296,
        nvlink_gbps=900, pcie_gbps=64, price_per_gpu_hour=1.5,
        provenance="NVIDIA HGX H20 datasheet (dense): Hopper with a sixth of H100's tensor throughput and more "
                   "bandwidth, so decode turns compute-bound at a batch of about 37; price assumed",
    ),
    "L4": GpuSpec(
        name="L4", hbm_gb=24, hbm_bandwidth_tbps=0.3, bf16_tflops=121, fp8_tflops=242,
        nvlink_gbps=0, pcie_gbps=32, price_per_gpu_hour=0.8,
        provenance="NVIDIA L4 datasheet (dense, GDDR6, PCIe 4.0, no NVLink); price assumed",
    ),
}

GPU_ALIASES: dict[str, str] = {
    "h100": "H100-SXM", "h100-sxm": "H100-SXM", "h100_sxm": "H100-SXM",
    "h200": "H200-SXM", "h200-sxm": "H200-SXM", "h200_sxm": "H200-SXM",
    "b200": "B200", "a100": "A100-80GB", "a100-80gb": "A100-80GB", "l40s": "L40S",
    "a100-40gb": "A100-40GB", "h20": "H20", "l4": "L4",
}


def gpu_spec(name: str) -> GpuSpec:
    """Look a GPU up by catalogue name or alias (case-insensitive)."""
    if name in GPU_CATALOGUE:
        return GPU_CATALOGUE[name]
    canonical = GPU_ALIASES.get(name.lower())
    if canonical is None:
        known = ", ".join(GPU_CATALOGUE)
        raise KeyError(f"unknown GPU {name!r}; known GPUs: {known}")
    return GPU_CATALOGUE[canonical]


# Host CPU threads per GPU when a scenario does not say: 26, as on GCP A3 (a3-highgpu-2g: 2 H100, 52 vCPUs;
# -8g: 8 H100, 208 vCPUs); a DGX H100 has 224 threads for 8 GPUs (28 each).
HOST_CPUS_PER_GPU = 26


class Hardware(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The cluster a deployment runs on."""

    gpu: str = "H100-SXM"
    gpus_per_node: int = 8
    nodes: int = 1
    host_dram_gb: float = 2048.0
    interconnect: str = "none"
    interconnect_gbps: float = 50.0
    node_hosts: list[str] = msgspec.field(default_factory=list)
    price_per_gpu_hour: float | None = None
    # Host CPU threads per node (os.cpu_count() on a server): grammar compiles run on them. None means
    # HOST_CPUS_PER_GPU for each GPU of the node.
    host_cpus: int | None = None

    @property
    def spec(self) -> GpuSpec:
        return gpu_spec(self.gpu)

    @property
    def cpus_per_node(self) -> int:
        """Host CPU threads of one node: `host_cpus`, else `HOST_CPUS_PER_GPU` per GPU."""
        return self.host_cpus if self.host_cpus is not None else HOST_CPUS_PER_GPU * self.gpus_per_node

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def gpu_hour_price(self) -> float:
        return self.price_per_gpu_hour if self.price_per_gpu_hour is not None else self.spec.price_per_gpu_hour

    def host(self, node: int) -> str:
        """Address of node `node` (0-based): explicit `node_hosts`, loopback for one node, else nodeNN."""
        if self.node_hosts:
            return self.node_hosts[node]
        if self.nodes == 1:
            return "127.0.0.1"
        return f"node{node + 1:02d}"
