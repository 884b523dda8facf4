"""transfer: tune hyperparameters on small μP proxies, prove they transfer, emit the full-scale
config. One sub-package per stage of the flow: `plan` (config → proxy family) → `search` (the
staged Optuna studies, the trainer) → `verdict` (curves, fits, judge) → `outputs` (target.yaml,
cost, report) → `archive`; `cli` is the thin command line on top (`python -m transfer.sweep`).

`from transfer import apply, hf` are the documented names for a user's trainer; they load on
first use (torch, and transformers for `hf`, are not paid by `import transfer`).
"""

__version__ = "0.1.0"

_PUBLIC = {"apply": "transfer.outputs.apply", "hf": "transfer.outputs.hf"}


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        return importlib.import_module(_PUBLIC[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
