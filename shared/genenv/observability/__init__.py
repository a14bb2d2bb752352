"""Ways to watch a run outside the control plane: PNG curves (matplotlib) and TensorBoard event files."""
