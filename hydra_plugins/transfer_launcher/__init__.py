"""transfer's Hydra launcher plugins (launchers.py)."""
