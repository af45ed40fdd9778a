"""Print the signatures of NKI's programmatic compile API, as this interpreter's SDK has them.

`python -P -m kernelsweep.doctor.signatures '<sys.path as JSON>'`, run by `doctor --smoke` in a
process of its own (importing the SDK may take a NeuronCore). NKI 0.7's driver (SDK 2.33) is not
documented anywhere public, so the first 2.33 host answers the addendum's open question O1 in one
run: every function and class below that imports is printed with `inspect.signature`, and an import
that fails is printed with its error. Standard library only, and Python 3.10 syntax, so it runs in
whichever interpreter the SDK lives in.
"""

import importlib
import inspect
import json
import sys

# (module, names) in the order AWS's harnesses import them (nki-library test/utils/kernel_tracer.py,
# nki-autotune runner/compile.py; reference Corrections 1).
WANTED = (
    ("nki.compiler.driver", ("compile_to_bir", "compile_bir_to_neff", "CompileOptions")),
    ("nki.compiler.ncc_driver", ("compile_bir_to_neff", "CompileOptions", "CompiledKernel")),
    ("nki.compiler.frontend", ("ParserFrontend", "TracerFrontend")),
    ("nki.compiler", ("CompileConfig", "SpecializationConfig")),
    ("nki", ("jit", "simulate")),
)


def describe(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        return f"<no signature: {type(exc).__name__}>"


def lines() -> list[str]:
    out = []
    for module_name, names in WANTED:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # an SDK import can raise anything (placeholders raise ImportError)
            out.append(f"{module_name}: not importable ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")
            continue
        for name in names:
            if hasattr(module, name):
                out.append(f"{module_name}.{name}{describe(getattr(module, name))}")
    return out


def main() -> int:
    for entry in reversed(json.loads(sys.argv[1]) if len(sys.argv) > 1 else []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    print("\n".join(lines()))
    return 0


if __name__ == "__main__":
    from kernelsweep.toolchain.parent_death import arm

    arm()  # first: this tool dies with the run that started it (process.run_tool)
    sys.exit(main())
