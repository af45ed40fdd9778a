"""What every result row states about itself: the schema version it was written under, its status
values, and the prefix of its per-axis columns. Below the row and the schema, which both use them."""

# 2 added `latencies_us`, 3 the insight columns (results.insight), 4 `neff_compile_host`, 5 `neff_debug_info`
# and `alloc_fallback`; older rows read them as null
SCHEMA_VERSION = 5
PARAM_PREFIX = "param_"
OK, FAILED, INCORRECT = "ok", "failed", "incorrect"  # a row's status: docs/schema.md
CONFIRMATION = "confirmation"  # repeats `compare --confirm` captured again: not a run of the point
