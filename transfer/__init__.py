"""transfer: tune hyperparameters on small μP proxies, prove they transfer, emit the full-scale
config. Folders are layers, each importing only those below it (docs/architecture.md): `cli`
(`python -m transfer.sweep`) → `run` (a run as a whole) → `outputs` (target.yaml, report) →
`verdict` (the grids that train) → `search` (the trainer, the staged Optuna studies) beside
`judge` (the pure judge: numpy only) → `archive` (beside `proxies`) → `core` (config, μP rules,
scaling laws, cost, corpus).

`from transfer import apply, hf` are the documented names for a user's trainer; they load on
first use (torch, and transformers for `hf`, are not paid by `import transfer`).
"""

import time as _time

__version__ = "0.1.0"
# when this process first imported `transfer`: a run's startup is counted from here
# (`transfer.search.phases.process_age`)
STARTED = _time.time()

_PUBLIC = {"apply": "transfer.outputs.apply", "hf": "transfer.outputs.hf"}


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        return importlib.import_module(_PUBLIC[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
