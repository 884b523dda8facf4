"""The command lines: `sweep` (the main job), `validate` ("is my model μP?"), `clihelp`
(`--help` without Hydra), `run` and `validate_job` (the jobs). The only package that reads
Hydra's `DictConfig`."""
