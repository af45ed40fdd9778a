"""What each NKI generation accepts, as the simulated tracer enforces it.

Facts from the reference's Corrections section 3 and the NKI migration guides (SDK 2.32 docs):

  legacy  SDK <= 2.26   `neuronxcc.nki` namespace; nl.load/store/matmul/copy, nl.par_dim and block
                        dimensions all exist; no `nki` package at all
  0.1     SDK 2.27      the `nki` namespace; block dimensions and nl.par_dim removed; the nl.load,
                        nl.store, nl.matmul ... convenience APIs removed; nisa with `dst=` operands;
                        reshaping a shared_hbm/private_hbm tensor fails its partition size check
  0.2     SDK 2.28      as 0.1, with that reshape fixed
  0.3     SDK 2.29      nl.load/store/copy/matmul/transpose/zeros... back as experimental wrappers;
                        outputs must be in nl.shared_hbm; `nki.jit(platform_target=...)` is an error;
                        nc_matmul takes `accumulate=`
  0.4     SDK 2.30      `neuronxcc.nki.*` inside a kernel is a compile error; PSUM -> SBUF nl.copy
                        unsupported (known issue)
  0.5     SDK 2.31      the same PSUM copy known issue
  0.6     SDK 2.32      PSUM nl.copy fixed
  0.7     SDK 2.33      specialization by Python tracing (the parsing one only behind
                        NKI_COMPILER_FRONTEND=custom); a kernel's LNC from NEURON_LOGICAL_NC_CONFIG,
                        a kernel/compiler mismatch is NCC_EVRF066; dynamic_range removed,
                        affine/sequential/static_range deprecated aliases of range (addendum F2-F10)

Each generation's nki.isa / nki.language signatures are the SDK's published stubs (sim.nki.stubs).

Part of the checks read the kernel's source (`check_source`, as a parsing front end sees it, dead
branches included); the rest happen while the kernel runs on the model (kernelsweep.sim.nki.lang).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.sim.config import CURRENT_NKI
from kernelsweep.sim.nki.errors import NkiError

NEURONXCC_IN_KERNEL = (
    "neuronxcc.nki.* inside an NKI kernel is a compilation error since NKI 0.4 (SDK 2.30); use the nki.* namespace"
)
WRAPPERS = frozenset({"load", "store", "copy", "matmul", "transpose", "zeros", "ones", "full"})


@dataclass(frozen=True)
class Generation:
    name: str  # "legacy", "0.1" ... "0.7"
    sdk: str

    @property
    def legacy(self) -> bool:
        return self.name == "legacy"

    @property
    def version(self) -> tuple[int, int]:
        return (0, 0) if self.legacy else (0, int(self.name.split(".")[1]))

    @property
    def namespace(self) -> str:
        return "neuronxcc.nki" if self.legacy else "nki"

    @property
    def has_wrappers(self) -> bool:
        return self.legacy or self.version >= (0, 3)

    @property
    def removed_language(self) -> frozenset[str]:
        """nki.language names this generation does not have (AttributeError when used)."""
        if self.legacy:
            return frozenset()
        removed = frozenset({"par_dim"}) | (frozenset() if self.has_wrappers else WRAPPERS)
        return removed | ({"dynamic_range"} if self.dynamic_range_removed else frozenset())

    @property
    def ranges_deprecated(self) -> bool:
        """NKI 0.7: affine_range, sequential_range, static_range are Python's range, deprecated (F4)."""
        return self.version >= (0, 7)

    @property
    def dynamic_range_removed(self) -> bool:
        """NKI 0.7 removed the dynamic loop constructs 0.6 deprecated (addendum F3)."""
        return self.version >= (0, 7)

    @property
    def kernel_lnc_from_env(self) -> bool:
        """NKI 0.7 takes a kernel's LNC from NEURON_LOGICAL_NC_CONFIG (default 1) and the compiler
        rejects a kernel/compiler mismatch: NCC_EVRF066 (addendum F6, F10)."""
        return self.version >= (0, 7)

    @property
    def traces_python(self) -> bool:
        """NKI 0.7 specializes a kernel by running it (F2): only executed code is checked, unless
        NKI_COMPILER_FRONTEND=custom keeps the parsing specialization (read when a kernel is traced)."""
        return self.version >= (0, 7)

    @property
    def shared_hbm_reshape_broken(self) -> bool:
        """NKI 0.1 (SDK 2.27): reshaping a shared_hbm or private_hbm tensor fails its partition size
        check; fixed in 0.2.0 (SDK release-notes/components/nki.rst). The built-in MLP reshapes both."""
        return self.name == "0.1"

    @property
    def psum_copy_broken(self) -> bool:
        return self.name in ("0.4", "0.5")

    @property
    def outputs_in_shared_hbm(self) -> bool:
        return not self.legacy and self.version >= (0, 3)

    @property
    def neuronxcc_in_kernel_is_error(self) -> bool:
        return not self.legacy and self.version >= (0, 4)

    @property
    def nisa_dst_operands(self) -> bool:
        """Beta 2 (0.2+) ISA calls write into a `dst` tile; legacy ones return a new tile."""
        return not self.legacy


GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation("legacy", "<= 2.26"),
        Generation("0.1", "2.27"),
        Generation("0.2", "2.28"),
        Generation("0.3", "2.29"),
        Generation("0.4", "2.30"),
        Generation("0.5", "2.31"),
        Generation("0.6", "2.32"),
        Generation("0.7", "2.33"),
    )
}
CURRENT = CURRENT_NKI


def get_generation(name: str) -> Generation:
    try:
        return GENERATIONS[name]
    except KeyError:
        raise ValueError(f"unknown NKI generation {name!r}; use one of {', '.join(GENERATIONS)}") from None


def check_source(path: Path, function: str, generation: Generation, whole: bool = True) -> list[str]:
    """Reject what the generation refuses in the kernel as a parsing front end sees it: the kernel
    function and every module-level function it calls, dead branches included (`whole`; a tracing
    front end sees only what runs, so then only the decorator, which runs at import); returns warnings."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if function not in functions:
        return []  # the run reports the missing function
    imports = {alias: module for node in ast.walk(tree) for alias, module in _imports(node)}
    warnings: list[str] = []
    if whole:
        nodes = _reachable(functions, function)
        nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        warnings = _check_nodes(nodes, imports, path, generation)
    for decorator in functions[function].decorator_list:
        if isinstance(decorator, ast.Call) and generation.outputs_in_shared_hbm:
            if any(k.arg == "platform_target" for k in decorator.keywords):
                raise NkiError(
                    f"{path.name}:{decorator.lineno}: nki.jit(platform_target=...) raises since NKI 0.3; "
                    "set NEURON_PLATFORM_TARGET_OVERRIDE instead"
                )
    return sorted(set(warnings))


def _check_nodes(nodes: list[ast.AST], imports: dict[str, str], path: Path, generation: Generation) -> list[str]:
    warnings = []
    for node in nodes:
        module = _neuronxcc_use(node, imports)
        if module and not generation.legacy:
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if generation.neuronxcc_in_kernel_is_error:
                raise NkiError(f"{where}: {NEURONXCC_IN_KERNEL}")
            warnings.append(f"{where}: {module} inside an NKI kernel is deprecated")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if imports.get(node.value.id, "").endswith("nki.language") and node.attr in generation.removed_language:
                raise NkiError(
                    f"{path.name}:{node.lineno}: module '{generation.namespace}.language' has no attribute "
                    f"'{node.attr}' (NKI {generation.name}, SDK {generation.sdk})"
                )
    return warnings


def _imports(node: ast.AST) -> list[tuple[str, str]]:
    """(local name, module it names) for an import statement."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [(a.asname or a.name, f"{node.module}.{a.name}") for a in node.names]
    return []


def _reachable(functions: dict[str, ast.FunctionDef], start: str) -> list[ast.AST]:
    seen, todo, nodes = {start}, [start], []
    while todo:
        for node in ast.walk(functions[todo.pop()]):
            nodes.append(node)
            if isinstance(node, ast.Name) and node.id in functions and node.id not in seen:
                seen.add(node.id)
                todo.append(node.id)
    return nodes


def _neuronxcc_use(node: ast.AST, imports: dict[str, str]) -> str | None:
    for _, module in _imports(node):
        if module.split(".")[0] == "neuronxcc":
            return module
    if isinstance(node, ast.Name) and imports.get(node.id, "").split(".")[0] == "neuronxcc":
        return imports[node.id]
    return None
