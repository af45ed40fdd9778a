"""Where bytes are kept: result and artifact locations (a folder or S3), the content-addressed artifact
store, the trace and compile caches in it, and the probe that proves a location writable first."""
