"""Delta rules: for every operator of a plan, its output changes from its input changes (and its state)."""
