"""transfer: tune hyperparameters on small μP proxies, prove they transfer, emit the full-scale
config. The library modules follow the data flow: config → family → search (the stages) →
validator → emit/cost → archive; `python -m transfer.sweep` is the thin CLI on top."""

__version__ = "0.1.0"
