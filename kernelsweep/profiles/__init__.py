"""Reading a profile: the profiler's files and their schemas, one normalised metrics record, which engine
bounds a point, and where in the kernel's source its time goes."""
