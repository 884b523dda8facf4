"""The command lines: `sweep` (the main job), `validate` ("is my model μP?"), `clihelp`
(`--help` without Hydra), `run` and `validate_job` (the jobs). Hydra and OmegaConf are touched
here and in `transfer.plan` (`config`, `compose`, `planner`, `family`, `custom`, `audit`), and
nowhere below it: the run `Context` carries the typed `Config` dataclasses
(`transfer.plan.config.to_config`)."""
