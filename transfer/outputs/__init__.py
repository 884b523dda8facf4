"""What a run writes, from plain values: the emitted `target.yaml` (`emit`, `train_block`),
`hf/config.json` (`hf`), `init_`/`param_groups` for a user's trainer (`apply`), the report and
the printed summary (`report`, `summary`), the plots (`plots`), and the one run-folder writer
(`write`)."""
