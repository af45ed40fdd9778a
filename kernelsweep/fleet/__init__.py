"""The fleet's plan, in plain Python: shards per platform family, which SDK each host runs, the compile
farm's split of compiling from capturing, which family this host is, and what a fleet run cost."""
