"""What a WebGPU row says about where it ran, read from what the page reported: the adapter's label and whether
it is a software (fallback) adapter, and which ONNX nodes onnxruntime-web's WebGPU execution provider took and
which fell back to its CPU (wasm) provider, parsed from ORT's verbose session log ("Node placements", and the
"kernel not found" / "Force fallback to CPU" lines that say why). Pure functions over strings and dicts: nothing
here talks to a browser.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any, Iterable

from deploytool.value import value

WEBGPU_EP = "WebGpuExecutionProvider"
CPU_EP = "CPUExecutionProvider"
# Copies between host and GPU memory that ORT inserts itself: not nodes of the model.
INSERTED_OPS = ("MemcpyFromHost", "MemcpyToHost")

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PLACED = re.compile(r"(All nodes|Node\(s\)) placed on \[(\w+)\]\. Number of nodes: (\d+)")
_NODE = re.compile(r"VerifyEachNodeIsAssignedToAnEp\]\s{2,}(\S+) \((.*)\)\s*$")
_NO_KERNEL = re.compile(r"kernel not found in registries for Op type: (\S+) node name: (.*?)\s*$")
_CPU_PREFERRED = re.compile(r"Force fallback to CPU execution for node: (.*?) because")


def is_software_adapter(adapter: dict[str, Any]) -> bool:
    """A fallback adapter (the browser's own word for one that is software or much slower), or SwiftShader's."""
    if adapter.get("is_fallback_adapter"):
        return True
    text = " ".join(str(adapter.get(k) or "") for k in ("vendor", "architecture", "device", "description"))
    return "swiftshader" in text.lower()


def adapter_label(adapter: dict[str, Any]) -> str:
    """`google swiftshader (fallback adapter)`: vendor and architecture (device or description when given)."""
    parts = [str(adapter.get(k) or "").strip() for k in ("vendor", "architecture", "device", "description")]
    name = " ".join(dict.fromkeys(p for p in parts if p)) or "unnamed adapter"
    if adapter.get("is_fallback_adapter"):
        return f"{name} (fallback adapter)"
    return f"{name} (software)" if is_software_adapter(adapter) else name


@value
class Placement:
    """Nodes by execution provider, as `(op type, node name)`, and why nodes left the WebGPU EP."""

    known: bool  # ORT logged its node placement
    nodes: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    no_kernel: dict[str, str] = field(default_factory=dict)  # node name -> op type the WebGPU EP has no kernel for
    cpu_preferred: tuple[str, ...] = ()  # nodes ORT moved to the CPU itself (small shape arithmetic)
    counts: dict[str, int] = field(default_factory=dict)  # nodes per EP as ORT counted them (copies included)

    @property
    def fallback(self) -> list[tuple[str, str]]:
        """The model's nodes that ran on the CPU (wasm) EP instead of WebGPU."""
        return [(op, name) for op, name in self.nodes.get(CPU_EP, []) if op not in INSERTED_OPS]

    @property
    def on_webgpu(self) -> list[tuple[str, str]]:
        return [(op, name) for op, name in self.nodes.get(WEBGPU_EP, []) if op not in INSERTED_OPS]

    @property
    def webgpu_count(self) -> int:
        """Model nodes on the WebGPU EP (ORT lists them unless all nodes are there; then it only counts them)."""
        listed = self.nodes.get(WEBGPU_EP)
        return len(self.on_webgpu) if listed else self.counts.get(WEBGPU_EP, 0)

    def fallback_ops(self) -> dict[str, int]:
        """Op type -> how many of its nodes fell back."""
        out: dict[str, int] = {}
        for op, _ in self.fallback:
            out[op] = out.get(op, 0) + 1
        return dict(sorted(out.items()))

    def unsupported_ops(self) -> list[str]:
        """Op types of fallen-back nodes the WebGPU EP has no kernel for (the rest ORT chose to put on the CPU)."""
        return sorted({op for op, name in self.fallback if name in self.no_kernel})

    def sentence(self) -> str:
        if not self.known:
            return "onnxruntime-web logged no node placement: which nodes fell back from WebGPU to wasm is unknown"
        n_gpu, fallback = self.webgpu_count, self.fallback
        if not fallback:
            return f"onnxruntime-web ran all {n_gpu} nodes on its WebGPU execution provider"
        ops = ", ".join(f"{op} x{k}" if k > 1 else op for op, k in self.fallback_ops().items())
        missing = self.unsupported_ops()
        why = (f"; no WebGPU kernel for {', '.join(missing)}" if missing else "") + \
            ("; the rest ORT placed on the CPU itself (shape arithmetic)"
             if any(name not in self.no_kernel for _, name in fallback) else "")
        return (f"onnxruntime-web ran {n_gpu} nodes on WebGPU and {len(fallback)} fell back to its CPU (wasm) "
                f"provider: {ops}{why}")

    def to_json(self) -> dict[str, Any]:
        return {"known": self.known, "webgpu_nodes": self.webgpu_count,
                "fallback_nodes": [f"{op} ({name})" for op, name in self.fallback],
                "fallback_ops": self.fallback_ops(), "no_webgpu_kernel": self.unsupported_ops(),
                "cpu_preferred_nodes": list(self.cpu_preferred)}


def ort_placement(lines: Iterable[str]) -> Placement:
    """Parse onnxruntime-web's verbose session log (console lines, in order)."""
    nodes: dict[str, list[tuple[str, str]]] = {}
    no_kernel: dict[str, str] = {}
    preferred: list[str] = []
    counts: dict[str, int] = {}
    current: str | None = None
    known = False
    for raw in lines:
        for line in _ANSI.sub("", str(raw)).splitlines():
            placed = _PLACED.search(line)
            if placed:
                known, current = True, placed.group(2)
                counts[current] = int(placed.group(3))
                if placed.group(1) == "Node(s)":
                    nodes.setdefault(current, [])
                continue
            node = _NODE.search(line)
            if node and current in nodes:
                nodes[current].append((node.group(1), node.group(2)))
                continue
            missing = _NO_KERNEL.search(line)
            if missing:
                no_kernel[missing.group(2)] = missing.group(1)
                continue
            cpu = _CPU_PREFERRED.search(line)
            if cpu and cpu.group(1) not in preferred:
                preferred.append(cpu.group(1))
    return Placement(known, nodes, no_kernel, tuple(preferred), counts)
