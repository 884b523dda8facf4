"""Stage 3, the grids that train: the width, depth and horizon checks (`width`, `depth`,
`horizon` over `axis_grid`), each grid's plan (`plan`), the coordinate checks (`coord`) and every
worker's share of them (`checks`). Their curves are judged by the pure `transfer.judge`."""
