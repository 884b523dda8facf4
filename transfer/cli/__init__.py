"""The command lines: `sweep` (the main job), `validate` ("is my model μP?"), `clihelp`
(`--help` without Hydra), `run` and `validate_job` (the jobs). Hydra and OmegaConf are touched
here and in `transfer.core.compose` only: the jobs turn the composed config into the plain
`Config` dataclasses (`transfer.core.compose.as_config`), which is all that the planner and
everything below it read."""
