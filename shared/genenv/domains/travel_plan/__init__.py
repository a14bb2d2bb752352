"""TravelPlanner: ``domain`` (queries and reference database loading, prompts, validation), ``checker``
(upstream's commonsense and hard constraints) and ``benchmark`` (the ``travelplanner`` evaluator)."""
