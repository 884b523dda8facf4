"""The ground every layer stands on: the config as plain dataclasses (`config`, composed by
Hydra in `compose`), errors and exit codes (`errors`), the hyperparameter names (`hparams`), the
μP and CompleteP rules (`rules`) and the one classification of parameters (`params`), the
published scaling laws (`scaling`), the cost model (`cost`), the corpus (`data`), the
`ProxyFamily` protocol (`protocol`) and the μP audit of a user's model (`audit`).

Nothing here imports another `transfer` package or `proxies`, nor Optuna."""
