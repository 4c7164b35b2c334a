"""The model as tcalc sees it: ModelConfig and the workload/parallelism/training settings (config), and
what a checkpoint stores (checkpoint). The bottom layer: imports only errors."""
