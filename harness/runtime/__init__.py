"""The isolation runtime: the zygote every cell forks from, its limits and warm-up, and the
cell's runner that assembles the stages of harness.cell in the forked child."""
