"""One Prefect task per stage, installed as `kernelsweep.tasks`. Thin: names, retries, run ids; the work lives in
kernelsweep.stages."""

from kernelsweep.tasks.capture import capture_task
from kernelsweep.tasks.compile import compile_task
from kernelsweep.tasks.extract import extract_task
from kernelsweep.tasks.inputs import inputs_task
from kernelsweep.tasks.store import store_task
from kernelsweep.tasks.trace import trace_task

__all__ = ["capture_task", "compile_task", "extract_task", "inputs_task", "store_task", "trace_task"]
