"""Requests: a command's settings resolved once, from its flags (or API keywords), then the job
file's section, then the defaults (`model.config.resolve`), into the estimators' inputs: one
module per family of commands, shared by the CLI, the Python API and `tcalc check`."""
