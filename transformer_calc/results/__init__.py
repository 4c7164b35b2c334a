"""What each command returns, composed from the estimators: one module per command (params, memory,
flops and mfu, inference, serve, train and plan, check, catalog) and the parts they share (common)."""
