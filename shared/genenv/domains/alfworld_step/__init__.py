"""ALFWorld, one step at a time: ``domain`` (expert trajectories as steps, prompts, validation), ``checker``
(canonical admissible commands) and ``benchmark`` (the ``alfworld`` evaluator, replayed in TextWorld)."""
