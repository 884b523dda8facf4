"""The pure judge, below the grids that train (`transfer.verdict`): plain numbers in, a verdict
out. The log2-lr curves (`curves`), the two-sided shared-curvature fit and its bootstrap
(`shared_curvature`), the verdict and its rules (`verdict`: `judge`, `Limits`, `Verdict`), the
optimum's trajectory to the target (`trajectory`), the joint width × depth estimate (`joint`), the
seed rounds that decide a straddling interval (`rounds`), the horizon law (`horizon_law`) and a
single curve's parabola (`fit`). numpy only: no torch, Optuna or mup (the import contracts hold
it)."""
