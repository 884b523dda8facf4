"""Stage 3, the verdict: lr grids and curves (`curves`), the shared-curvature fit
(`shared_curvature`), the pure `judge`, the width, depth and horizon checks (`width`, `depth`,
`horizon` over `axis_grid`), the coordinate checks (`coord`)."""
