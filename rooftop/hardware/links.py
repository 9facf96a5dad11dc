"""The links a copy crosses: PCIe or NVLink-C2C to the host, NVLink to a peer GPU, per GPU row of
the spec table (`data/links.json`, keyed like `data/gpus.json`, each row citing its source).

A host<->device copy is bounded by the host link, a peer copy by NVLink (or PCIe without one), a
device-to-device copy by HBM (read + write): never a host copy against HBM. Rates are per
direction in bytes/s; None where the table has no row (the copy's rate is then shown alone).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

LANES = 16  # every table row is an x16 part


@dataclass(frozen=True)
class Link:
    name: str          # "PCIe gen5 x16", "NVLink-C2C", "NVLink"
    bw: float          # bytes/s per direction
    source: str
    confirmed: bool = True


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(resources.files("rooftop").joinpath("data/links.json").read_text(encoding="utf-8"))


def pcie_bw(gen: int, lanes: int = LANES) -> float:
    """Bytes/s per direction of a PCIe link: GT/s x lanes x 128/130 / 8 (gen 3-5)."""
    gts = _table()["pcie_gts"][str(gen)]
    return gts * 1e9 * lanes * 128 / 130 / 8


def host_link(gpu_key: str | None) -> Link | None:
    """The host link of a spec row (PCIe, or NVLink-C2C on Grace parts), per direction."""
    row = _table()["links"].get(gpu_key or "")
    if row is None:
        return None
    ok = row.get("confirmed", True)
    if row.get("c2c_gbs"):
        return Link("NVLink-C2C", row["c2c_gbs"] * 1e9 / 2, row["source"], ok)
    if row.get("pcie"):
        return Link(f"PCIe gen{row['pcie']} x{LANES}", pcie_bw(row["pcie"]), row["source"], ok)
    return None


def peer_link(gpu_key: str | None) -> Link | None:
    """The link a peer (GPU<->GPU) copy crosses: NVLink where the part has it, else PCIe."""
    row = _table()["links"].get(gpu_key or "")
    if row is None:
        return None
    if row.get("nvlink_gbs"):
        return Link("NVLink", row["nvlink_gbs"] * 1e9 / 2, row["source"], row.get("confirmed", True))
    return host_link(gpu_key)
