"""Stage 1, the plan: the config as typed dataclasses (`config`), the one Hydra compose
(`compose`), the μP proxy family derived from the target (`family`, or `custom` for a user's
builder, checked by `audit` against `protocol`), the corpus (`data`) and the run's `Plan`
(`planner`)."""
