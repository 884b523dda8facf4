"""Stage 4, the outputs: the μP rules (`rules`) and parameter classes (`params`), the emitted
`target.yaml` (`emit`, `train_block`, `scaling`), its cost (`cost`), `hf/config.json` (`hf`),
`init_`/`param_groups` for a user's trainer (`apply`), the report and summary, and the one
run-folder writer (`write`)."""
