"""What a run does around its steps, each piece built from its own sub-config: the run
directory, metrics (monitor), the console, heartbeat, control, garbage collection, profiling,
the plot. Imports no torch."""
